(module
  (type (;0;) (func (param i32 i32 i32 i32)))
  (func $moved (type 0) (param i32 i32 i32 i32)
    (local i32 i32 i32 i32 f32 f32 i32)
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
    local.set 10
    local.get 10
    if
      loop
        local.get 6
        f32.load
        local.set 8
        local.get 8
        f32.neg
        local.set 9
        local.get 7
        local.get 9
        f32.store
        local.get 6
        i32.const 4
        i32.add
        local.set 6
        local.get 7
        i32.const 4
        i32.add
        local.set 7
        local.get 10
        i32.const 1
        i32.sub
        local.set 10
        local.get 10
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
