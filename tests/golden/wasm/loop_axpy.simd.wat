(module
  (type (;0;) (func (param i32 i32 i32 i32 i32)))
  (func $loop_axpy (type 0) (param i32 i32 i32 i32 i32)
    (local i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 v128 v128 v128 v128 i32 f32 f32 f32 f32 i32 i32 i32 i32 i32 v128 i32 f32 i32 i32 i32 i32 i32 i32 f32 i32 i32 i32 i32 i32 i32 i32 v128 v128 v128 i32 f32 f32 f32 i32 i32 i32 i32 i32 v128 i32 f32 i32)
    local.get 1
    local.get 0
    i32.const 0
    i32.mul
    i32.add
    local.set 6
    local.get 1
    local.get 0
    i32.const 16
    i32.mul
    i32.add
    local.set 7
    local.get 1
    local.get 0
    i32.const 32
    i32.mul
    i32.add
    local.set 12
    local.get 1
    local.get 0
    i32.const 48
    i32.mul
    i32.add
    local.set 28
    local.get 1
    local.get 0
    i32.const 64
    i32.mul
    i32.add
    local.set 36
    local.get 3
    local.set 5
    local.get 6
    local.set 8
    local.get 7
    local.set 9
    local.get 8
    local.get 2
    local.get 0
    i32.const 16
    i32.mul
    memory.copy
    i32.const 0
    local.set 10
    i32.const 3
    local.set 11
    block
      loop
        local.get 8
        local.set 13
        local.get 5
        local.set 14
        local.get 12
        local.set 15
        local.get 0
        i32.const 4
        i32.mul
        i32.const 2
        i32.shr_u
        local.set 16
        local.get 0
        i32.const 4
        i32.mul
        i32.const 3
        i32.and
        local.set 17
        local.get 16
        local.set 22
        local.get 22
        if
          loop
            local.get 13
            v128.load
            local.set 18
            local.get 14
            v128.load
            local.set 19
            v128.const i32x4 0x7fc00000 0x7fc00000 0x7fc00000 0x7fc00000
            local.get 18
            local.get 19
            f32x4.mul
            local.tee 20
            local.get 20
            local.get 20
            f32x4.ne
            v128.bitselect
            local.set 21
            local.get 15
            local.get 21
            v128.store
            local.get 13
            i32.const 16
            i32.add
            local.set 13
            local.get 14
            i32.const 16
            i32.add
            local.set 14
            local.get 15
            i32.const 16
            i32.add
            local.set 15
            local.get 22
            i32.const 1
            i32.sub
            local.set 22
            local.get 22
            br_if 0
          end
        end
        local.get 17
        local.set 27
        local.get 27
        if
          loop
            local.get 13
            f32.load
            local.set 23
            local.get 14
            f32.load
            local.set 24
            f32.const nan:0x400000
            local.get 23
            local.get 24
            f32.mul
            local.tee 26
            local.get 26
            local.get 26
            f32.ne
            select
            local.set 25
            local.get 15
            local.get 25
            f32.store
            local.get 13
            i32.const 4
            i32.add
            local.set 13
            local.get 14
            i32.const 4
            i32.add
            local.set 14
            local.get 15
            i32.const 4
            i32.add
            local.set 15
            local.get 27
            i32.const 1
            i32.sub
            local.set 27
            local.get 27
            br_if 0
          end
        end
        local.get 28
        local.set 29
        local.get 0
        i32.const 1
        i32.mul
        i32.const 2
        i32.shr_u
        local.set 30
        local.get 0
        i32.const 1
        i32.mul
        i32.const 3
        i32.and
        local.set 31
        local.get 30
        local.set 33
        local.get 33
        if
          loop
            local.get 10
            i32x4.splat
            f32x4.convert_i32x4_s
            local.set 32
            local.get 29
            local.get 32
            v128.store
            local.get 29
            i32.const 16
            i32.add
            local.set 29
            local.get 33
            i32.const 1
            i32.sub
            local.set 33
            local.get 33
            br_if 0
          end
        end
        local.get 31
        local.set 35
        local.get 35
        if
          loop
            local.get 10
            f32.convert_i32_s
            local.set 34
            local.get 29
            local.get 34
            f32.store
            local.get 29
            i32.const 4
            i32.add
            local.set 29
            local.get 35
            i32.const 1
            i32.sub
            local.set 35
            local.get 35
            br_if 0
          end
        end
        local.get 28
        i32.const 0
        i32.add
        local.set 37
        local.get 36
        i32.const 0
        i32.add
        local.set 38
        local.get 0
        local.set 43
        local.get 43
        if
          loop
            local.get 37
            local.set 39
            local.get 38
            local.set 40
            i32.const 4
            local.set 42
            local.get 42
            if
              loop
                local.get 39
                f32.load
                local.set 41
                local.get 40
                local.get 41
                f32.store
                local.get 40
                i32.const 4
                i32.add
                local.set 40
                local.get 42
                i32.const 1
                i32.sub
                local.set 42
                local.get 42
                br_if 0
              end
            end
            local.get 37
            i32.const 4
            i32.add
            local.set 37
            local.get 38
            i32.const 16
            i32.add
            local.set 38
            local.get 43
            i32.const 1
            i32.sub
            local.set 43
            local.get 43
            br_if 0
          end
        end
        local.get 12
        local.set 44
        local.get 36
        local.set 45
        local.get 9
        local.set 46
        local.get 0
        i32.const 4
        i32.mul
        i32.const 2
        i32.shr_u
        local.set 47
        local.get 0
        i32.const 4
        i32.mul
        i32.const 3
        i32.and
        local.set 48
        local.get 47
        local.set 52
        local.get 52
        if
          loop
            local.get 44
            v128.load
            local.set 49
            local.get 45
            v128.load
            local.set 50
            v128.const i32x4 0x7fc00000 0x7fc00000 0x7fc00000 0x7fc00000
            local.get 49
            local.get 50
            f32x4.add
            local.tee 20
            local.get 20
            local.get 20
            f32x4.ne
            v128.bitselect
            local.set 51
            local.get 46
            local.get 51
            v128.store
            local.get 44
            i32.const 16
            i32.add
            local.set 44
            local.get 45
            i32.const 16
            i32.add
            local.set 45
            local.get 46
            i32.const 16
            i32.add
            local.set 46
            local.get 52
            i32.const 1
            i32.sub
            local.set 52
            local.get 52
            br_if 0
          end
        end
        local.get 48
        local.set 56
        local.get 56
        if
          loop
            local.get 44
            f32.load
            local.set 53
            local.get 45
            f32.load
            local.set 54
            f32.const nan:0x400000
            local.get 53
            local.get 54
            f32.add
            local.tee 26
            local.get 26
            local.get 26
            f32.ne
            select
            local.set 55
            local.get 46
            local.get 55
            f32.store
            local.get 44
            i32.const 4
            i32.add
            local.set 44
            local.get 45
            i32.const 4
            i32.add
            local.set 45
            local.get 46
            i32.const 4
            i32.add
            local.set 46
            local.get 56
            i32.const 1
            i32.sub
            local.set 56
            local.get 56
            br_if 0
          end
        end
        local.get 8
        local.get 9
        local.set 8
        local.set 9
        local.get 10
        i32.const 1
        i32.add
        local.set 10
        local.get 11
        i32.const 1
        i32.sub
        local.tee 11
        br_if 0
      end
    end
    local.get 8
    local.set 57
    local.get 4
    local.set 58
    local.get 0
    i32.const 4
    i32.mul
    i32.const 2
    i32.shr_u
    local.set 59
    local.get 0
    i32.const 4
    i32.mul
    i32.const 3
    i32.and
    local.set 60
    local.get 59
    local.set 62
    local.get 62
    if
      loop
        local.get 57
        v128.load
        local.set 61
        local.get 58
        local.get 61
        v128.store
        local.get 57
        i32.const 16
        i32.add
        local.set 57
        local.get 58
        i32.const 16
        i32.add
        local.set 58
        local.get 62
        i32.const 1
        i32.sub
        local.set 62
        local.get 62
        br_if 0
      end
    end
    local.get 60
    local.set 64
    local.get 64
    if
      loop
        local.get 57
        f32.load
        local.set 63
        local.get 58
        local.get 63
        f32.store
        local.get 57
        i32.const 4
        i32.add
        local.set 57
        local.get 58
        i32.const 4
        i32.add
        local.set 58
        local.get 64
        i32.const 1
        i32.sub
        local.set 64
        local.get 64
        br_if 0
      end
    end)
  (memory (;0;) 1)
  (export "mem" (memory 0))
  (export "loop_axpy" (func 0)))
