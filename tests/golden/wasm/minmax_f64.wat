(module
  (type (;0;) (func (param i32 i32 i32 i32 i32 i32)))
  (func $minmax_f64 (type 0) (param i32 i32 i32 i32 i32 i32)
    (local i32 i32 i32 i32 f64 f64 f64 f64 f64 i32 i32)
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
    local.set 16
    local.get 16
    if
      loop
        local.get 6
        f64.load
        local.set 10
        local.get 7
        f64.load
        local.set 11
        f64.const nan:0x8000000000000
        local.get 10
        local.get 11
        f64.min
        local.tee 13
        local.get 13
        local.get 13
        f64.ne
        select
        local.set 12
        f64.const nan:0x8000000000000
        local.get 10
        local.get 11
        f64.max
        local.tee 13
        local.get 13
        local.get 13
        f64.ne
        select
        local.set 14
        local.get 14
        i32.trunc_sat_f64_s
        local.set 15
        local.get 8
        local.get 12
        f64.store
        local.get 9
        local.get 15
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
        local.get 16
        i32.const 1
        i32.sub
        local.set 16
        local.get 16
        br_if 0
      end
    end)
  (memory (;0;) 1)
  (export "mem" (memory 0))
  (export "minmax_f64" (func 0)))
