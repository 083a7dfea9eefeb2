(module
  (type (;0;) (func (param i32 i32 i32 i32 i32)))
  (func $loop_axpy (type 0) (param i32 i32 i32 i32 i32)
    (local i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 f32 f32 f32 f32 i32 i32 i32 f32 i32 i32 i32 i32 i32 i32 f32 i32 i32 i32 i32 i32 f32 f32 f32 i32 i32 i32 f32 i32)
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
    local.set 21
    local.get 1
    local.get 0
    i32.const 64
    i32.mul
    i32.add
    local.set 25
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
        local.set 20
        local.get 20
        if
          loop
            local.get 13
            f32.load
            local.set 16
            local.get 14
            f32.load
            local.set 17
            f32.const nan:0x400000
            local.get 16
            local.get 17
            f32.mul
            local.tee 19
            local.get 19
            local.get 19
            f32.ne
            select
            local.set 18
            local.get 15
            local.get 18
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
            local.get 20
            i32.const 1
            i32.sub
            local.set 20
            local.get 20
            br_if 0
          end
        end
        local.get 21
        local.set 22
        local.get 0
        i32.const 1
        i32.mul
        local.set 24
        local.get 24
        if
          loop
            local.get 10
            f32.convert_i32_s
            local.set 23
            local.get 22
            local.get 23
            f32.store
            local.get 22
            i32.const 4
            i32.add
            local.set 22
            local.get 24
            i32.const 1
            i32.sub
            local.set 24
            local.get 24
            br_if 0
          end
        end
        local.get 21
        i32.const 0
        i32.add
        local.set 26
        local.get 25
        i32.const 0
        i32.add
        local.set 27
        local.get 0
        local.set 32
        local.get 32
        if
          loop
            local.get 26
            local.set 28
            local.get 27
            local.set 29
            i32.const 4
            local.set 31
            local.get 31
            if
              loop
                local.get 28
                f32.load
                local.set 30
                local.get 29
                local.get 30
                f32.store
                local.get 29
                i32.const 4
                i32.add
                local.set 29
                local.get 31
                i32.const 1
                i32.sub
                local.set 31
                local.get 31
                br_if 0
              end
            end
            local.get 26
            i32.const 4
            i32.add
            local.set 26
            local.get 27
            i32.const 16
            i32.add
            local.set 27
            local.get 32
            i32.const 1
            i32.sub
            local.set 32
            local.get 32
            br_if 0
          end
        end
        local.get 12
        local.set 33
        local.get 25
        local.set 34
        local.get 9
        local.set 35
        local.get 0
        i32.const 4
        i32.mul
        local.set 39
        local.get 39
        if
          loop
            local.get 33
            f32.load
            local.set 36
            local.get 34
            f32.load
            local.set 37
            f32.const nan:0x400000
            local.get 36
            local.get 37
            f32.add
            local.tee 19
            local.get 19
            local.get 19
            f32.ne
            select
            local.set 38
            local.get 35
            local.get 38
            f32.store
            local.get 33
            i32.const 4
            i32.add
            local.set 33
            local.get 34
            i32.const 4
            i32.add
            local.set 34
            local.get 35
            i32.const 4
            i32.add
            local.set 35
            local.get 39
            i32.const 1
            i32.sub
            local.set 39
            local.get 39
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
    local.set 40
    local.get 4
    local.set 41
    local.get 0
    i32.const 4
    i32.mul
    local.set 43
    local.get 43
    if
      loop
        local.get 40
        f32.load
        local.set 42
        local.get 41
        local.get 42
        f32.store
        local.get 40
        i32.const 4
        i32.add
        local.set 40
        local.get 41
        i32.const 4
        i32.add
        local.set 41
        local.get 43
        i32.const 1
        i32.sub
        local.set 43
        local.get 43
        br_if 0
      end
    end)
  (memory (;0;) 1)
  (export "mem" (memory 0))
  (export "loop_axpy" (func 0)))
