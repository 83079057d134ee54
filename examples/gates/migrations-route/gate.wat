;; Gate "migrations-route": a change under a `migrations/` directory (at the root or in any
;; folder) is routed to the `database` approver group. Written by hand in the WebAssembly text
;; format against the canonical ABI of the `airlock:gate/gate` world (gates/wit/gate.wit):
;;
;; - `check` gets a pointer to the request record (more than 16 flat values, so it is passed in
;;   memory); its `files` list is at offset 120 (pointer, length), each `changed-file` is 12
;;   bytes: path pointer, path length, status byte (0 added, 1 modified, 2 deleted).
;; - it returns a pointer to the verdict: tag byte (0 allow, 1 flag, 2 route, 3 deny) at 0,
;;   the string's pointer at 4 and length at 8.
;; - `cabi_realloc` hands out memory: the host copies the request in with it.
;;
;; `airlock-broker gate test gate.wat --examples examples.toml` builds and runs it; gate.rs
;; beside it is the same rule written with the Rust SDK (airlock-gate-sdk).
(module
  (memory (export "memory") 1)
  ;; Bump allocation: [$heap, $heap_end) is free; more comes from memory.grow, never from
  ;; pages someone else (the WASI adapter) grew.
  (global $heap (mut i32) (i32.const 1024))
  (global $heap_end (mut i32) (i32.const 65536))
  (data (i32.const 16) "migrations/")
  (data (i32.const 32) "database")

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

  ;; Whether one of the path's directories is `migrations`.
  (func $under_migrations (param $path i32) (param $len i32) (result i32)
    (local $i i32)
    (block $none
      (loop $next
        (br_if $none (i32.ge_u (local.get $i) (local.get $len)))
        (if (i32.or (i32.eqz (local.get $i))
                    (i32.eq (i32.load8_u (i32.add (local.get $path) (i32.sub (local.get $i) (i32.const 1))))
                            (i32.const 47)))
          (then
            (if (call $starts_with
                  (i32.add (local.get $path) (local.get $i))
                  (i32.sub (local.get $len) (local.get $i))
                  (i32.const 16) (i32.const 11))
              (then (return (i32.const 1))))))
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

  (func (export "check") (param $request i32) (result i32)
    (local $files i32) (local $count i32) (local $i i32) (local $file i32)
    (local.set $files (i32.load offset=120 (local.get $request)))
    (local.set $count (i32.load offset=124 (local.get $request)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        (local.set $file (i32.add (local.get $files) (i32.mul (local.get $i) (i32.const 12))))
        (if (call $under_migrations (i32.load (local.get $file)) (i32.load offset=4 (local.get $file)))
          (then (return (call $verdict (i32.const 2) (i32.const 32) (i32.const 8)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (call $verdict (i32.const 0) (i32.const 0) (i32.const 0)))
)
