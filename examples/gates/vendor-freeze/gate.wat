;; Gate "vendor-freeze": `vendor/` is frozen; a change to any file under it is denied, naming the
;; file. Hand-written against the canonical ABI of the `airlock:gate/gate` world (see
;; ../migrations-route/gate.wat for the layout of the request and the verdict); gate.rs beside
;; it is the same rule written with the Rust SDK.
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (global $heap_end (mut i32) (i32.const 65536))
  (data (i32.const 16) "vendor/")
  (data (i32.const 32) "vendor/ is frozen (vendored code changes upstream first); the diff changes ")

  (func $alloc (param $size i32) (result i32)
    (local $ptr i32) (local $pages i32) (local $old i32)
    (local.set $ptr (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (i32.add (local.get $ptr) (local.get $size)) (global.get $heap_end))
      (then
        (local.set $pages
          (i32.shr_u (i32.add (local.get $size) (i32.const 65535)) (i32.const 16)))
        (local.set $old (memory.grow (local.get $pages)))
        (if (i32.eq (local.get $old) (i32.const -1)) (then unreachable))
        (local.set $ptr (i32.shl (local.get $old) (i32.const 16)))
        (global.set $heap_end
          (i32.add (local.get $ptr) (i32.shl (local.get $pages) (i32.const 16))))))
    (global.set $heap (i32.add (local.get $ptr) (local.get $size)))
    (local.get $ptr))

  (func (export "cabi_realloc")
    (param $old i32) (param $old_size i32) (param $align i32) (param $new_size i32)
    (result i32)
    (local $ptr i32)
    (local.set $ptr (call $alloc (local.get $new_size)))
    (if (local.get $old)
      (then (memory.copy (local.get $ptr) (local.get $old) (local.get $old_size))))
    (local.get $ptr))

  ;; Whether the bytes at $s (length $len) start with the $plen bytes at $p.
  (func $starts_with (param $s i32) (param $len i32) (param $p i32) (param $plen i32)
    (result i32)
    (local $i i32)
    (if (i32.lt_u (local.get $len) (local.get $plen)) (then (return (i32.const 0))))
    (block $differ
      (loop $next
        (if (i32.eq (local.get $i) (local.get $plen)) (then (return (i32.const 1))))
        (br_if $differ
          (i32.ne (i32.load8_u (i32.add (local.get $s) (local.get $i)))
                  (i32.load8_u (i32.add (local.get $p) (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 0))

  (func $verdict (param $tag i32) (param $ptr i32) (param $len i32) (result i32)
    (local $out i32)
    (local.set $out (call $alloc (i32.const 12)))
    (i32.store8 (local.get $out) (local.get $tag))
    (i32.store offset=4 (local.get $out) (local.get $ptr))
    (i32.store offset=8 (local.get $out) (local.get $len))
    (local.get $out))

  ;; "<the freeze's words><path>", newly allocated; its length is 75 + the path's.
  (func $reason (param $path i32) (param $len i32) (result i32)
    (local $out i32)
    (local.set $out (call $alloc (i32.add (i32.const 75) (local.get $len))))
    (memory.copy (local.get $out) (i32.const 32) (i32.const 75))
    (memory.copy (i32.add (local.get $out) (i32.const 75)) (local.get $path) (local.get $len))
    (local.get $out))

  (func (export "check") (param $request i32) (result i32)
    (local $files i32) (local $count i32) (local $i i32) (local $file i32)
    (local $path i32) (local $len i32)
    (local.set $files (i32.load offset=120 (local.get $request)))
    (local.set $count (i32.load offset=124 (local.get $request)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        (local.set $file (i32.add (local.get $files) (i32.mul (local.get $i) (i32.const 12))))
        (local.set $path (i32.load (local.get $file)))
        (local.set $len (i32.load offset=4 (local.get $file)))
        (if (call $starts_with (local.get $path) (local.get $len) (i32.const 16) (i32.const 7))
          (then
            (return (call $verdict (i32.const 3)
              (call $reason (local.get $path) (local.get $len))
              (i32.add (i32.const 75) (local.get $len))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (call $verdict (i32.const 0) (i32.const 0) (i32.const 0)))
)
