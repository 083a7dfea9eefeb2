(module
  (type (;0;) (func (param i32 i32 i32 i32 i32)))
  (func $scaled_pair (type 0) (param i32 i32 i32 i32 i32)
    (local i32 i32 i32 i32 i32 i32 i32 i32 i32 f32 i32 i32 i32 i32 i32 f32 f32 f32 f32 i32 i32 i32 f32 i32 i32 i32 i32 f32 f32 f32 i32)
    local.get 1
    local.get 0
    i32.const 0
    i32.mul
    i32.add
    local.set 7
    local.get 1
    local.get 0
    i32.const 16
    i32.mul
    i32.add
    local.set 8
    local.get 1
    local.get 0
    i32.const 32
    i32.mul
    i32.add
    local.set 9
    local.get 2
    local.set 5
    local.get 3
    local.set 6
    local.get 6
    i32.const 0
    i32.add
    local.set 10
    local.get 9
    i32.const 0
    i32.add
    local.set 11
    local.get 0
    local.set 16
    local.get 16
    if
      loop
        local.get 10
        local.set 12
        local.get 11
        local.set 13
        i32.const 4
        local.set 15
        local.get 15
        if
          loop
            local.get 12
            f32.load
            local.set 14
            local.get 13
            local.get 14
            f32.store
            local.get 13
            i32.const 4
            i32.add
            local.set 13
            local.get 15
            i32.const 1
            i32.sub
            local.set 15
            local.get 15
            br_if 0
          end
        end
        local.get 10
        i32.const 4
        i32.add
        local.set 10
        local.get 11
        i32.const 16
        i32.add
        local.set 11
        local.get 16
        i32.const 1
        i32.sub
        local.set 16
        local.get 16
        br_if 0
      end
    end
    local.get 5
    local.set 17
    local.get 9
    local.set 18
    local.get 7
    local.set 19
    local.get 0
    i32.const 4
    i32.mul
    local.set 24
    local.get 24
    if
      loop
        local.get 17
        f32.load
        local.set 20
        local.get 18
        f32.load
        local.set 21
        f32.const nan:0x400000
        local.get 20
        local.get 21
        f32.mul
        local.tee 23
        local.get 23
        local.get 23
        f32.ne
        select
        local.set 22
        local.get 19
        local.get 22
        f32.store
        local.get 17
        i32.const 4
        i32.add
        local.set 17
        local.get 18
        i32.const 4
        i32.add
        local.set 18
        local.get 19
        i32.const 4
        i32.add
        local.set 19
        local.get 24
        i32.const 1
        i32.sub
        local.set 24
        local.get 24
        br_if 0
      end
    end
    local.get 5
    local.set 25
    local.get 8
    local.set 26
    local.get 0
    i32.const 4
    i32.mul
    local.set 28
    local.get 28
    if
      loop
        local.get 25
        f32.load
        local.set 27
        local.get 26
        local.get 27
        f32.store
        local.get 25
        i32.const 4
        i32.add
        local.set 25
        local.get 26
        i32.const 4
        i32.add
        local.set 26
        local.get 28
        i32.const 1
        i32.sub
        local.set 28
        local.get 28
        br_if 0
      end
    end
    local.get 7
    local.set 29
    local.get 8
    local.set 30
    local.get 4
    local.set 31
    local.get 0
    i32.const 4
    i32.mul
    local.set 35
    local.get 35
    if
      loop
        local.get 29
        f32.load
        local.set 32
        local.get 30
        f32.load
        local.set 33
        f32.const nan:0x400000
        local.get 32
        local.get 33
        f32.sub
        local.tee 23
        local.get 23
        local.get 23
        f32.ne
        select
        local.set 34
        local.get 31
        local.get 34
        f32.store
        local.get 29
        i32.const 4
        i32.add
        local.set 29
        local.get 30
        i32.const 4
        i32.add
        local.set 30
        local.get 31
        i32.const 4
        i32.add
        local.set 31
        local.get 35
        i32.const 1
        i32.sub
        local.set 35
        local.get 35
        br_if 0
      end
    end)
  (memory (;0;) 1)
  (export "mem" (memory 0))
  (export "scaled_pair" (func 0)))
