;; Gate "changelog-required": a change that adds a public function (more lines starting with
;; `pub fn ` or `def ` in a patched `.rs` or `.py` file than at the pin) must come with a
;; `CHANGELOG.md` change; without one it is flagged for the approver, naming the file. The file
;; contents are read through WASI preview1 (`path_open`, `fd_read`, `fd_close`) from the two
;; preopened trees: fd 3 is `/base` (the pinned side), fd 4 is `/patched`. Hand-written against
;; the canonical ABI of the `airlock:gate/gate` world (see ../migrations-route/gate.wat for the
;; layout); gate.rs beside it is the same rule written with the Rust SDK.
(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_close"
    (func $fd_close (param i32) (result i32)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (global $heap_end (mut i32) (i32.const 65536))
  (global $read_len (mut i32) (i32.const 0))
  (data (i32.const 16) "CHANGELOG.md")
  (data (i32.const 32) ".rs")
  (data (i32.const 36) ".py")
  (data (i32.const 40) "pub fn ")
  (data (i32.const 48) "def ")
  (data (i32.const 64) "a new public function in ")
  (data (i32.const 96) " without a CHANGELOG.md entry")

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

  ;; Whether the $len bytes at $s end with the 3 bytes at $suffix.
  (func $ends_with3 (param $s i32) (param $len i32) (param $suffix i32) (result i32)
    (if (i32.lt_u (local.get $len) (i32.const 3)) (then (return (i32.const 0))))
    (call $starts_with
      (i32.sub (i32.add (local.get $s) (local.get $len)) (i32.const 3)) (i32.const 3)
      (local.get $suffix) (i32.const 3)))

  ;; The whole file $path of the tree open as $dir, newly allocated; its length in $read_len.
  ;; A file that cannot be opened or read traps: the broker turns that into a deny.
  (func $read_file (param $dir i32) (param $path i32) (param $path_len i32) (result i32)
    (local $io i32) (local $fd i32) (local $buf i32) (local $cap i32) (local $len i32)
    (local $n i32) (local $bigger i32)
    ;; $io: the opened fd at 0, one iovec (pointer, length) at 4, the count read at 12.
    (local.set $io (call $alloc (i32.const 16)))
    (if (call $path_open (local.get $dir) (i32.const 0) (local.get $path) (local.get $path_len)
          (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (local.get $io))
      (then unreachable))
    (local.set $fd (i32.load (local.get $io)))
    (local.set $cap (i32.const 65536))
    (local.set $buf (call $alloc (local.get $cap)))
    (loop $more
      (if (i32.eq (local.get $len) (local.get $cap))
        (then
          (local.set $bigger (call $alloc (i32.shl (local.get $cap) (i32.const 1))))
          (memory.copy (local.get $bigger) (local.get $buf) (local.get $len))
          (local.set $buf (local.get $bigger))
          (local.set $cap (i32.shl (local.get $cap) (i32.const 1)))))
      (i32.store offset=4 (local.get $io) (i32.add (local.get $buf) (local.get $len)))
      (i32.store offset=8 (local.get $io) (i32.sub (local.get $cap) (local.get $len)))
      (if (call $fd_read (local.get $fd) (i32.add (local.get $io) (i32.const 4)) (i32.const 1)
            (i32.add (local.get $io) (i32.const 12)))
        (then unreachable))
      (local.set $n (i32.load offset=12 (local.get $io)))
      (local.set $len (i32.add (local.get $len) (local.get $n)))
      (br_if $more (local.get $n)))
    (drop (call $fd_close (local.get $fd)))
    (global.set $read_len (local.get $len))
    (local.get $buf))

  ;; How many lines of the $len bytes at $text start with `pub fn ` or `def `.
  (func $public_functions (param $text i32) (param $len i32) (result i32)
    (local $i i32) (local $count i32) (local $rest i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (if (i32.or (i32.eqz (local.get $i))
                    (i32.eq (i32.load8_u (i32.add (local.get $text) (i32.sub (local.get $i) (i32.const 1))))
                            (i32.const 10)))
          (then
            (local.set $rest (i32.sub (local.get $len) (local.get $i)))
            (if (i32.or
                  (call $starts_with (i32.add (local.get $text) (local.get $i)) (local.get $rest)
                    (i32.const 40) (i32.const 7))
                  (call $starts_with (i32.add (local.get $text) (local.get $i)) (local.get $rest)
                    (i32.const 48) (i32.const 4)))
              (then (local.set $count (i32.add (local.get $count) (i32.const 1)))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $count))

  ;; Public functions of one side of a file: fd 3 is /base, fd 4 is /patched.
  (func $count_in (param $dir i32) (param $path i32) (param $len i32) (result i32)
    (local $text i32)
    (local.set $text (call $read_file (local.get $dir) (local.get $path) (local.get $len)))
    (call $public_functions (local.get $text) (global.get $read_len)))

  (func (export "check") (param $request i32) (result i32)
    (local $files i32) (local $count i32) (local $i i32) (local $file i32)
    (local $path i32) (local $len i32) (local $status i32) (local $before i32)
    (local $changelog i32) (local $api i32) (local $api_len i32) (local $out i32)
    (local.set $files (i32.load offset=120 (local.get $request)))
    (local.set $count (i32.load offset=124 (local.get $request)))
    (local.set $api (i32.const -1))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        (local.set $file (i32.add (local.get $files) (i32.mul (local.get $i) (i32.const 12))))
        (local.set $path (i32.load (local.get $file)))
        (local.set $len (i32.load offset=4 (local.get $file)))
        (local.set $status (i32.load8_u offset=8 (local.get $file)))
        (if (i32.and (i32.eq (local.get $len) (i32.const 12))
                     (call $starts_with (local.get $path) (local.get $len) (i32.const 16) (i32.const 12)))
          (then (local.set $changelog (i32.const 1))))
        (if (i32.and
              (i32.and (i32.ne (local.get $status) (i32.const 2))
                       (i32.eq (local.get $api) (i32.const -1)))
              (i32.or (call $ends_with3 (local.get $path) (local.get $len) (i32.const 32))
                      (call $ends_with3 (local.get $path) (local.get $len) (i32.const 36))))
          (then
            (local.set $before (i32.const 0))
            (if (i32.eq (local.get $status) (i32.const 1))
              (then (local.set $before (call $count_in (i32.const 3) (local.get $path) (local.get $len)))))
            (if (i32.gt_u (call $count_in (i32.const 4) (local.get $path) (local.get $len))
                          (local.get $before))
              (then
                (local.set $api (local.get $path))
                (local.set $api_len (local.get $len))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (if (i32.or (local.get $changelog) (i32.eq (local.get $api) (i32.const -1)))
      (then (return (call $verdict (i32.const 0) (i32.const 0) (i32.const 0)))))
    ;; flag("a new public function in <path> without a CHANGELOG.md entry")
    (local.set $out (call $alloc (i32.add (i32.const 54) (local.get $api_len))))
    (memory.copy (local.get $out) (i32.const 64) (i32.const 25))
    (memory.copy (i32.add (local.get $out) (i32.const 25)) (local.get $api) (local.get $api_len))
    (memory.copy (i32.add (i32.add (local.get $out) (i32.const 25)) (local.get $api_len))
      (i32.const 96) (i32.const 29))
    (call $verdict (i32.const 1) (local.get $out) (i32.add (i32.const 54) (local.get $api_len))))
)
