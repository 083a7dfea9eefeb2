(module
  (type (;0;) (func (param i32 i32 i32 i32 i32 i32)))
  (func $minmax_f64 (type 0) (param i32 i32 i32 i32 i32 i32)
    (local i32 i32 i32 i32 i32 i32 v128 v128 v128 v128 v128 v128 v128 v128 v128 v128 i32 f64 f64 f64 f64 f64 i32 i32)
    local.get 2
    local.set 6
    local.get 3
    local.set 7
    local.get 4
    local.set 8
    local.get 5
    local.set 9
    local.get 0
    i32.const 1
    i32.mul
    i32.const 2
    i32.shr_u
    local.set 10
    local.get 0
    i32.const 1
    i32.mul
    i32.const 3
    i32.and
    local.set 11
    local.get 10
    local.set 22
    local.get 22
    if
      loop
        local.get 6
        v128.load
        local.set 12
        local.get 6
        v128.load offset=16
        local.set 13
        local.get 7
        v128.load
        local.set 14
        local.get 7
        v128.load offset=16
        local.set 15
        v128.const i32x4 0x00000000 0x7ff80000 0x00000000 0x7ff80000
        local.get 12
        local.get 14
        f64x2.min
        local.tee 16
        local.get 16
        local.get 16
        f64x2.ne
        v128.bitselect
        local.set 17
        v128.const i32x4 0x00000000 0x7ff80000 0x00000000 0x7ff80000
        local.get 13
        local.get 15
        f64x2.min
        local.tee 16
        local.get 16
        local.get 16
        f64x2.ne
        v128.bitselect
        local.set 18
        v128.const i32x4 0x00000000 0x7ff80000 0x00000000 0x7ff80000
        local.get 12
        local.get 14
        f64x2.max
        local.tee 16
        local.get 16
        local.get 16
        f64x2.ne
        v128.bitselect
        local.set 19
        v128.const i32x4 0x00000000 0x7ff80000 0x00000000 0x7ff80000
        local.get 13
        local.get 15
        f64x2.max
        local.tee 16
        local.get 16
        local.get 16
        f64x2.ne
        v128.bitselect
        local.set 20
        local.get 19
        i32x4.trunc_sat_f64x2_s_zero
        local.get 20
        i32x4.trunc_sat_f64x2_s_zero
        i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
        local.set 21
        local.get 8
        local.get 17
        v128.store
        local.get 8
        local.get 18
        v128.store offset=16
        local.get 9
        local.get 21
        v128.store
        local.get 6
        i32.const 32
        i32.add
        local.set 6
        local.get 7
        i32.const 32
        i32.add
        local.set 7
        local.get 8
        i32.const 32
        i32.add
        local.set 8
        local.get 9
        i32.const 16
        i32.add
        local.set 9
        local.get 22
        i32.const 1
        i32.sub
        local.set 22
        local.get 22
        br_if 0
      end
    end
    local.get 11
    local.set 29
    local.get 29
    if
      loop
        local.get 6
        f64.load
        local.set 23
        local.get 7
        f64.load
        local.set 24
        f64.const nan:0x8000000000000
        local.get 23
        local.get 24
        f64.min
        local.tee 26
        local.get 26
        local.get 26
        f64.ne
        select
        local.set 25
        f64.const nan:0x8000000000000
        local.get 23
        local.get 24
        f64.max
        local.tee 26
        local.get 26
        local.get 26
        f64.ne
        select
        local.set 27
        local.get 27
        i32.trunc_sat_f64_s
        local.set 28
        local.get 8
        local.get 25
        f64.store
        local.get 9
        local.get 28
        i32.store
        local.get 6
        i32.const 8
        i32.add
        local.set 6
        local.get 7
        i32.const 8
        i32.add
        local.set 7
        local.get 8
        i32.const 8
        i32.add
        local.set 8
        local.get 9
        i32.const 4
        i32.add
        local.set 9
        local.get 29
        i32.const 1
        i32.sub
        local.set 29
        local.get 29
        br_if 0
      end
    end)
  (memory (;0;) 1)
  (export "mem" (memory 0))
  (export "minmax_f64" (func 0)))
