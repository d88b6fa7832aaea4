// RUN: warploom-opt --list-passes | FileCheck %s

// --list-passes prints every registered wl pass with its description, then the target pipelines.

// CHECK: warploom passes:
// CHECK-DAG: --wl-fuse {{.*}}wl.attention
// CHECK-DAG: --wl-verify {{.*}}shape rules
// CHECK: pipelines:
// CHECK: sm_90a: wl-verify,wl-fuse,wl-verify
