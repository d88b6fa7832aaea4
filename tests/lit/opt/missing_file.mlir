// RUN: not warploom-opt %S/no/such/file.mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not warploom-opt %s -o %S/no/such/dir/out.mlir 2>&1 | FileCheck %s --check-prefix=OUTPUT
// RUN: not warploom-opt %S/Inputs/not_utf8.bin 2>&1 | FileCheck %s --check-prefix=BINARY

// Files that cannot be read or written give a one-line error and exit 1, no traceback.

// MISSING: warploom-opt: cannot read {{.*}}no/such/file.mlir: No such file or directory
// MISSING-NOT: Traceback

// OUTPUT: warploom-opt: cannot write {{.*}}no/such/dir/out.mlir: No such file or directory
// OUTPUT-NOT: Traceback

// BINARY: warploom-opt: cannot read {{.*}}not_utf8.bin: not UTF-8 text (byte offset 16)
// BINARY-NOT: Traceback
func.func @ok() {
  return
}
