(module
  (type (;0;) (func (param i32 i32 i32 i32 i32 i32)))
  (func $saxpy (type 0) (param i32 i32 i32 i32 i32 i32)
    (local i32 i32 i32 i32 i32 f32 i32 i32 i32 i32 i32 i32 i32 i32 v128 v128 v128 v128 v128 v128 i32 f32 f32 f32 f32 f32 f32 i32)
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
    i32.const 2
    i32.shr_u
    local.set 18
    local.get 0
    i32.const 4
    i32.mul
    i32.const 3
    i32.and
    local.set 19
    local.get 18
    local.set 26
    local.get 26
    if
      loop
        local.get 14
        v128.load
        local.set 20
        local.get 15
        v128.load
        local.set 21
        local.get 16
        v128.load
        local.set 22
        v128.const i32x4 0x7fc00000 0x7fc00000 0x7fc00000 0x7fc00000
        local.get 20
        local.get 21
        f32x4.mul
        local.tee 23
        local.get 23
        local.get 23
        f32x4.ne
        v128.bitselect
        local.set 24
        v128.const i32x4 0x7fc00000 0x7fc00000 0x7fc00000 0x7fc00000
        local.get 24
        local.get 22
        f32x4.add
        local.tee 23
        local.get 23
        local.get 23
        f32x4.ne
        v128.bitselect
        local.set 25
        local.get 17
        local.get 25
        v128.store
        local.get 14
        i32.const 16
        i32.add
        local.set 14
        local.get 15
        i32.const 16
        i32.add
        local.set 15
        local.get 16
        i32.const 16
        i32.add
        local.set 16
        local.get 17
        i32.const 16
        i32.add
        local.set 17
        local.get 26
        i32.const 1
        i32.sub
        local.set 26
        local.get 26
        br_if 0
      end
    end
    local.get 19
    local.set 33
    local.get 33
    if
      loop
        local.get 14
        f32.load
        local.set 27
        local.get 15
        f32.load
        local.set 28
        local.get 16
        f32.load
        local.set 29
        f32.const nan:0x400000
        local.get 27
        local.get 28
        f32.mul
        local.tee 31
        local.get 31
        local.get 31
        f32.ne
        select
        local.set 30
        f32.const nan:0x400000
        local.get 30
        local.get 29
        f32.add
        local.tee 31
        local.get 31
        local.get 31
        f32.ne
        select
        local.set 32
        local.get 17
        local.get 32
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
        local.get 33
        i32.const 1
        i32.sub
        local.set 33
        local.get 33
        br_if 0
      end
    end)
  (memory (;0;) 1)
  (export "mem" (memory 0))
  (export "saxpy" (func 0)))
