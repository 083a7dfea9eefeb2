(module
  (type (;0;) (func (param i32 i32 i32 i32 i32)))
  (func $scaled_pair (type 0) (param i32 i32 i32 i32 i32)
    (local i32 i32 i32 i32 i32 i32 i32 i32 i32 f32 i32 i32 i32 i32 i32 i32 i32 v128 v128 v128 v128 i32 f32 f32 f32 f32 i32 i32 i32 i32 i32 v128 i32 f32 i32 i32 i32 i32 i32 i32 v128 v128 v128 i32 f32 f32 f32 i32)
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
    i32.const 2
    i32.shr_u
    local.set 20
    local.get 0
    i32.const 4
    i32.mul
    i32.const 3
    i32.and
    local.set 21
    local.get 20
    local.set 26
    local.get 26
    if
      loop
        local.get 17
        v128.load
        local.set 22
        local.get 18
        v128.load
        local.set 23
        v128.const i32x4 0x7fc00000 0x7fc00000 0x7fc00000 0x7fc00000
        local.get 22
        local.get 23
        f32x4.mul
        local.tee 24
        local.get 24
        local.get 24
        f32x4.ne
        v128.bitselect
        local.set 25
        local.get 19
        local.get 25
        v128.store
        local.get 17
        i32.const 16
        i32.add
        local.set 17
        local.get 18
        i32.const 16
        i32.add
        local.set 18
        local.get 19
        i32.const 16
        i32.add
        local.set 19
        local.get 26
        i32.const 1
        i32.sub
        local.set 26
        local.get 26
        br_if 0
      end
    end
    local.get 21
    local.set 31
    local.get 31
    if
      loop
        local.get 17
        f32.load
        local.set 27
        local.get 18
        f32.load
        local.set 28
        f32.const nan:0x400000
        local.get 27
        local.get 28
        f32.mul
        local.tee 30
        local.get 30
        local.get 30
        f32.ne
        select
        local.set 29
        local.get 19
        local.get 29
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
        local.get 31
        i32.const 1
        i32.sub
        local.set 31
        local.get 31
        br_if 0
      end
    end
    local.get 5
    local.set 32
    local.get 8
    local.set 33
    local.get 0
    i32.const 4
    i32.mul
    i32.const 2
    i32.shr_u
    local.set 34
    local.get 0
    i32.const 4
    i32.mul
    i32.const 3
    i32.and
    local.set 35
    local.get 34
    local.set 37
    local.get 37
    if
      loop
        local.get 32
        v128.load
        local.set 36
        local.get 33
        local.get 36
        v128.store
        local.get 32
        i32.const 16
        i32.add
        local.set 32
        local.get 33
        i32.const 16
        i32.add
        local.set 33
        local.get 37
        i32.const 1
        i32.sub
        local.set 37
        local.get 37
        br_if 0
      end
    end
    local.get 35
    local.set 39
    local.get 39
    if
      loop
        local.get 32
        f32.load
        local.set 38
        local.get 33
        local.get 38
        f32.store
        local.get 32
        i32.const 4
        i32.add
        local.set 32
        local.get 33
        i32.const 4
        i32.add
        local.set 33
        local.get 39
        i32.const 1
        i32.sub
        local.set 39
        local.get 39
        br_if 0
      end
    end
    local.get 7
    local.set 40
    local.get 8
    local.set 41
    local.get 4
    local.set 42
    local.get 0
    i32.const 4
    i32.mul
    i32.const 2
    i32.shr_u
    local.set 43
    local.get 0
    i32.const 4
    i32.mul
    i32.const 3
    i32.and
    local.set 44
    local.get 43
    local.set 48
    local.get 48
    if
      loop
        local.get 40
        v128.load
        local.set 45
        local.get 41
        v128.load
        local.set 46
        v128.const i32x4 0x7fc00000 0x7fc00000 0x7fc00000 0x7fc00000
        local.get 45
        local.get 46
        f32x4.sub
        local.tee 24
        local.get 24
        local.get 24
        f32x4.ne
        v128.bitselect
        local.set 47
        local.get 42
        local.get 47
        v128.store
        local.get 40
        i32.const 16
        i32.add
        local.set 40
        local.get 41
        i32.const 16
        i32.add
        local.set 41
        local.get 42
        i32.const 16
        i32.add
        local.set 42
        local.get 48
        i32.const 1
        i32.sub
        local.set 48
        local.get 48
        br_if 0
      end
    end
    local.get 44
    local.set 52
    local.get 52
    if
      loop
        local.get 40
        f32.load
        local.set 49
        local.get 41
        f32.load
        local.set 50
        f32.const nan:0x400000
        local.get 49
        local.get 50
        f32.sub
        local.tee 30
        local.get 30
        local.get 30
        f32.ne
        select
        local.set 51
        local.get 42
        local.get 51
        f32.store
        local.get 40
        i32.const 4
        i32.add
        local.set 40
        local.get 41
        i32.const 4
        i32.add
        local.set 41
        local.get 42
        i32.const 4
        i32.add
        local.set 42
        local.get 52
        i32.const 1
        i32.sub
        local.set 52
        local.get 52
        br_if 0
      end
    end)
  (memory (;0;) 1)
  (export "mem" (memory 0))
  (export "scaled_pair" (func 0)))
