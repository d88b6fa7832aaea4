// RUN: not warploom-opt %s --wl-nope 2>&1 | FileCheck %s --check-prefix=FLAG
// RUN: not warploom-opt %s --no-such-upstream-pass 2>&1 | FileCheck %s --check-prefix=UPSTREAM
// RUN: not warploom-opt %s --wl-fuse=no-such-option=1 2>&1 | FileCheck %s --check-prefix=OPTION

// An unknown wl pass is a usage error that lists the known warploom passes; unknown
// upstream passes and unknown pass options fail too, without a traceback or any IR output.

// FLAG: warploom-opt: unknown pass 'wl-nope'; warploom passes: {{.*}}wl-fuse{{.*}}wl-verify
// FLAG-NOT: Traceback
// FLAG-NOT: func.func

// UPSTREAM: warploom-opt: cannot add pipeline element 'no-such-upstream-pass'
// UPSTREAM-SAME: 'no-such-upstream-pass' does not refer to a registered pass or pass pipeline
// UPSTREAM-NOT: Traceback

// OPTION: warploom-opt: pass wl-fuse has no option 'no-such-option'
// OPTION-NOT: Traceback
func.func @id(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "wl.relu"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
