(module
  (type (;0;) (func (param i32 i32 i32 i32 i32 i32)))
  (func $saxpy (type 0) (param i32 i32 i32 i32 i32 i32)
    (local i32 i32 i32 i32 i32 f32 i32 i32 i32 i32 i32 i32 f32 f32 f32 f32 f32 f32 i32)
    local.get 1
    local.get 0
    i32.const 0
    i32.mul
    i32.add
    local.set 6
    local.get 2
    i32.const 0
    i32.add
    local.set 7
    local.get 6
    i32.const 0
    i32.add
    local.set 8
    local.get 0
    local.set 13
    local.get 13
    if
      loop
        local.get 7
        local.set 9
        local.get 8
        local.set 10
        i32.const 4
        local.set 12
        local.get 12
        if
          loop
            local.get 9
            f32.load
            local.set 11
            local.get 10
            local.get 11
            f32.store
            local.get 10
            i32.const 4
            i32.add
            local.set 10
            local.get 12
            i32.const 1
            i32.sub
            local.set 12
            local.get 12
            br_if 0
          end
        end
        local.get 7
        i32.const 4
        i32.add
        local.set 7
        local.get 8
        i32.const 16
        i32.add
        local.set 8
        local.get 13
        i32.const 1
        i32.sub
        local.set 13
        local.get 13
        br_if 0
      end
    end
    local.get 6
    local.set 14
    local.get 3
    local.set 15
    local.get 4
    local.set 16
    local.get 5
    local.set 17
    local.get 0
    i32.const 4
    i32.mul
    local.set 24
    local.get 24
    if
      loop
        local.get 14
        f32.load
        local.set 18
        local.get 15
        f32.load
        local.set 19
        local.get 16
        f32.load
        local.set 20
        f32.const nan:0x400000
        local.get 18
        local.get 19
        f32.mul
        local.tee 22
        local.get 22
        local.get 22
        f32.ne
        select
        local.set 21
        f32.const nan:0x400000
        local.get 21
        local.get 20
        f32.add
        local.tee 22
        local.get 22
        local.get 22
        f32.ne
        select
        local.set 23
        local.get 17
        local.get 23
        f32.store
        local.get 14
        i32.const 4
        i32.add
        local.set 14
        local.get 15
        i32.const 4
        i32.add
        local.set 15
        local.get 16
        i32.const 4
        i32.add
        local.set 16
        local.get 17
        i32.const 4
        i32.add
        local.set 17
        local.get 24
        i32.const 1
        i32.sub
        local.set 24
        local.get 24
        br_if 0
      end
    end)
  (memory (;0;) 1)
  (export "mem" (memory 0))
  (export "saxpy" (func 0)))
