// RUN: not warploom-opt %s 2>&1 | FileCheck %s

// Unparsable input: a located diagnostic, a non-zero exit, no Python traceback, no IR.

// CHECK: garbage.mlir:[[# @LINE + 4]]:1: error: custom op 'garbage' is unknown
// CHECK-NOT: Traceback
// CHECK-NOT: module

garbage
