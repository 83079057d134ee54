//! The retrieval benchmark's pure parts: which lines a gold patch touches.

use airlock_codegraph::eval::{changed_lines, gold_files};

#[test]
fn changed_lines_are_the_old_lines_a_patch_removes_or_inserts_between() {
    let patch = "\
diff --git a/pkg/a.py b/pkg/a.py
index 1111111..2222222 100644
--- a/pkg/a.py
+++ b/pkg/a.py
@@ -10,4 +10,4 @@ def f():
     x = 1
-    y = 2
+    y = 3
     z = 3
     return x
@@ -40,2 +40,3 @@ def g():
     a = 1
+    b = 2
     return a
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1,2 @@
+def h():
+    pass
diff --git a/pkg/gone.py b/pkg/gone.py
deleted file mode 100644
--- a/pkg/gone.py
+++ /dev/null
@@ -1,2 +0,0 @@
-def old():
-    pass
";
    let changed = changed_lines(patch);
    // Line 11 is replaced; the insertion after old line 40 touches lines 40 and 41.
    let a: Vec<u32> = changed["pkg/a.py"].iter().copied().collect();
    assert_eq!(a, [11, 40, 41]);
    // A new file has no old lines; a deleted file's lines are all touched.
    assert!(!changed.contains_key("pkg/new.py"), "{changed:?}");
    assert!(
        changed
            .get("pkg/gone.py")
            .is_some_and(|l| l.iter().copied().eq([1, 2])),
        "{changed:?}"
    );
    assert_eq!(gold_files(patch), ["pkg/a.py", "pkg/gone.py", "pkg/new.py"]);
}
