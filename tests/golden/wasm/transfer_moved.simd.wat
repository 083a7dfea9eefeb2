(module
  (type (;0;) (func (param i32 i32 i32 i32)))
  (func $moved (type 0) (param i32 i32 i32 i32)
    (local i32 i32 i32 i32 i32 i32 v128 v128 i32 f32 f32 i32)
    local.get 1
    local.get 0
    i32.const 0
    i32.mul
    i32.add
    local.set 4
    local.get 1
    local.get 0
    i32.const 16
    i32.mul
    i32.add
    local.set 5
    local.get 4
    local.get 2
    local.get 0
    i32.const 16
    i32.mul
    memory.copy
    local.get 4
    local.set 6
    local.get 5
    local.set 7
    local.get 0
    i32.const 4
    i32.mul
    i32.const 2
    i32.shr_u
    local.set 8
    local.get 0
    i32.const 4
    i32.mul
    i32.const 3
    i32.and
    local.set 9
    local.get 8
    local.set 12
    local.get 12
    if
      loop
        local.get 6
        v128.load
        local.set 10
        local.get 10
        f32x4.neg
        local.set 11
        local.get 7
        local.get 11
        v128.store
        local.get 6
        i32.const 16
        i32.add
        local.set 6
        local.get 7
        i32.const 16
        i32.add
        local.set 7
        local.get 12
        i32.const 1
        i32.sub
        local.set 12
        local.get 12
        br_if 0
      end
    end
    local.get 9
    local.set 15
    local.get 15
    if
      loop
        local.get 6
        f32.load
        local.set 13
        local.get 13
        f32.neg
        local.set 14
        local.get 7
        local.get 14
        f32.store
        local.get 6
        i32.const 4
        i32.add
        local.set 6
        local.get 7
        i32.const 4
        i32.add
        local.set 7
        local.get 15
        i32.const 1
        i32.sub
        local.set 15
        local.get 15
        br_if 0
      end
    end
    local.get 3
    local.get 5
    local.get 0
    i32.const 16
    i32.mul
    memory.copy)
  (memory (;0;) 1)
  (export "mem" (memory 0))
  (export "moved" (func 0)))
