(module
  (type (;0;) (func (param i32 i32 i32 i32)))
  (func $sum_i32 (type 0) (param i32 i32 i32 i32)
    (local i32 i32 i32 i32 i32 v128 v128 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)
    local.get 1
    local.get 0
    i32.const 0
    i32.mul
    i32.add
    local.set 4
    local.get 2
    local.set 5
    local.get 4
    local.set 6
    local.get 0
    i32.const 3
    i32.mul
    i32.const 2
    i32.shr_u
    local.set 7
    local.get 0
    i32.const 3
    i32.mul
    i32.const 3
    i32.and
    local.set 8
    local.get 7
    local.set 11
    local.get 11
    if
      loop
        local.get 5
        v128.load
        local.set 9
        v128.const i32x4 0x00000000 0x00000000 0x00000000 0x00000000
        i32.const 0
        local.get 9
        i32x4.extract_lane 0
        i32.const 1
        local.get 9
        i32x4.extract_lane 0
        local.get 9
        i32x4.extract_lane 0
        i32.eqz
        local.get 9
        i32x4.extract_lane 0
        i32.const -2147483648
        i32.eq
        local.get 9
        i32x4.extract_lane 0
        i32.const -1
        i32.eq
        i32.and
        i32.or
        select
        i32.div_s
        local.get 9
        i32x4.extract_lane 0
        i32.eqz
        select
        i32x4.replace_lane 0
        i32.const 0
        local.get 9
        i32x4.extract_lane 1
        i32.const 1
        local.get 9
        i32x4.extract_lane 1
        local.get 9
        i32x4.extract_lane 1
        i32.eqz
        local.get 9
        i32x4.extract_lane 1
        i32.const -2147483648
        i32.eq
        local.get 9
        i32x4.extract_lane 1
        i32.const -1
        i32.eq
        i32.and
        i32.or
        select
        i32.div_s
        local.get 9
        i32x4.extract_lane 1
        i32.eqz
        select
        i32x4.replace_lane 1
        i32.const 0
        local.get 9
        i32x4.extract_lane 2
        i32.const 1
        local.get 9
        i32x4.extract_lane 2
        local.get 9
        i32x4.extract_lane 2
        i32.eqz
        local.get 9
        i32x4.extract_lane 2
        i32.const -2147483648
        i32.eq
        local.get 9
        i32x4.extract_lane 2
        i32.const -1
        i32.eq
        i32.and
        i32.or
        select
        i32.div_s
        local.get 9
        i32x4.extract_lane 2
        i32.eqz
        select
        i32x4.replace_lane 2
        i32.const 0
        local.get 9
        i32x4.extract_lane 3
        i32.const 1
        local.get 9
        i32x4.extract_lane 3
        local.get 9
        i32x4.extract_lane 3
        i32.eqz
        local.get 9
        i32x4.extract_lane 3
        i32.const -2147483648
        i32.eq
        local.get 9
        i32x4.extract_lane 3
        i32.const -1
        i32.eq
        i32.and
        i32.or
        select
        i32.div_s
        local.get 9
        i32x4.extract_lane 3
        i32.eqz
        select
        i32x4.replace_lane 3
        local.set 10
        local.get 6
        local.get 10
        v128.store
        local.get 5
        i32.const 16
        i32.add
        local.set 5
        local.get 6
        i32.const 16
        i32.add
        local.set 6
        local.get 11
        i32.const 1
        i32.sub
        local.set 11
        local.get 11
        br_if 0
      end
    end
    local.get 8
    local.set 14
    local.get 14
    if
      loop
        local.get 5
        i32.load
        local.set 12
        i32.const 0
        local.get 12
        i32.const 1
        local.get 12
        local.get 12
        i32.eqz
        local.get 12
        i32.const -2147483648
        i32.eq
        local.get 12
        i32.const -1
        i32.eq
        i32.and
        i32.or
        select
        i32.div_s
        local.get 12
        i32.eqz
        select
        local.set 13
        local.get 6
        local.get 13
        i32.store
        local.get 5
        i32.const 4
        i32.add
        local.set 5
        local.get 6
        i32.const 4
        i32.add
        local.set 6
        local.get 14
        i32.const 1
        i32.sub
        local.set 14
        local.get 14
        br_if 0
      end
    end
    local.get 4
    local.set 15
    local.get 3
    local.set 16
    local.get 0
    local.set 42
    local.get 42
    if
      loop
        local.get 15
        local.set 33
        i32.const 1024
        local.set 34
        i32.const 3
        local.set 36
        local.get 36
        if
          loop
            local.get 33
            i32.load
            local.set 35
            local.get 34
            local.get 35
            i32.store
            local.get 33
            i32.const 4
            i32.add
            local.set 33
            local.get 34
            i32.const 4
            i32.add
            local.set 34
            local.get 36
            i32.const 1
            i32.sub
            local.set 36
            local.get 36
            br_if 0
          end
        end
        i32.const 1036
        local.set 17
        i32.const 1
        local.set 18
        local.get 18
        if
          loop
            local.get 17
            i32.const 0
            i32.store
            local.get 17
            i32.const 4
            i32.add
            local.set 17
            local.get 18
            i32.const 1
            i32.sub
            local.set 18
            local.get 18
            br_if 0
          end
        end
        i32.const 1024
        local.set 19
        i32.const 1032
        local.set 20
        i32.const 1024
        local.set 21
        i32.const 2
        local.set 25
        local.get 25
        if
          loop
            local.get 19
            i32.load
            local.set 22
            local.get 20
            i32.load
            local.set 23
            local.get 22
            local.get 23
            i32.add
            local.set 24
            local.get 21
            local.get 24
            i32.store
            local.get 19
            i32.const 4
            i32.add
            local.set 19
            local.get 20
            i32.const 4
            i32.add
            local.set 20
            local.get 21
            i32.const 4
            i32.add
            local.set 21
            local.get 25
            i32.const 1
            i32.sub
            local.set 25
            local.get 25
            br_if 0
          end
        end
        i32.const 1024
        local.set 26
        i32.const 1028
        local.set 27
        i32.const 1024
        local.set 28
        i32.const 1
        local.set 32
        local.get 32
        if
          loop
            local.get 26
            i32.load
            local.set 29
            local.get 27
            i32.load
            local.set 30
            local.get 29
            local.get 30
            i32.add
            local.set 31
            local.get 28
            local.get 31
            i32.store
            local.get 26
            i32.const 4
            i32.add
            local.set 26
            local.get 27
            i32.const 4
            i32.add
            local.set 27
            local.get 28
            i32.const 4
            i32.add
            local.set 28
            local.get 32
            i32.const 1
            i32.sub
            local.set 32
            local.get 32
            br_if 0
          end
        end
        i32.const 1024
        local.set 37
        local.get 16
        local.set 38
        i32.const 1
        local.set 41
        local.get 41
        if
          loop
            local.get 37
            i32.load
            local.set 39
            local.get 39
            local.set 40
            local.get 38
            local.get 40
            i32.store
            local.get 37
            i32.const 4
            i32.add
            local.set 37
            local.get 38
            i32.const 4
            i32.add
            local.set 38
            local.get 41
            i32.const 1
            i32.sub
            local.set 41
            local.get 41
            br_if 0
          end
        end
        local.get 15
        i32.const 12
        i32.add
        local.set 15
        local.get 16
        i32.const 4
        i32.add
        local.set 16
        local.get 42
        i32.const 1
        i32.sub
        local.set 42
        local.get 42
        br_if 0
      end
    end)
  (memory (;0;) 1)
  (export "mem" (memory 0))
  (export "sum_i32" (func 0)))
