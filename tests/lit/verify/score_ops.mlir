// RUN: warploom-opt %s --split-input-file --verify-diagnostics

// The ops of score and mask modifiers written out (wl.index, wl.scalar, wl.constant, wl.gather, wl.compare,
// wl.where, the logic ops): the shape and type rules their verifier holds.

func.func @index_of_rank3(%s: tensor<8x16x16xbf16>) {
  // expected-error @+1 {{'wl.index' op grid is tensor<8x16x16xbf16>; an index reads the rank-4 [B, H, Sq, Sk] score grid}}
  %0 = "wl.index"(%s) {dim = "q_idx"} : (tensor<8x16x16xbf16>) -> tensor<8x16x16xi32>
  return
}

// -----

func.func @index_dim(%s: tensor<1x8x16x16xbf16>) {
  // expected-error @+1 {{'wl.index' op dim 'row' is not one of b, h, q_idx, kv_idx}}
  %0 = "wl.index"(%s) {dim = "row"} : (tensor<1x8x16x16xbf16>) -> tensor<1x8x16x16xi32>
  return
}

// -----

func.func @scalar_type() {
  // expected-error @+1 {{'wl.scalar' op a scalar is f32 or i32, not bf16}}
  %0 = "wl.scalar"() {name = "cap"} : () -> tensor<bf16>
  return
}

// -----

func.func @scalar_name() {
  // expected-error @+1 {{'wl.scalar' op scalar name 'soft cap' must be an identifier (it names a kernel parameter)}}
  %0 = "wl.scalar"() {name = "soft cap"} : () -> tensor<f32>
  return
}

// -----

func.func @where_condition(%s: tensor<1x8x16x16xbf16>) {
  // expected-error @+1 {{'wl.where' op cond is tensor<1x8x16x16xbf16>; where's condition is an i1 tensor (a comparison)}}
  %0 = "wl.where"(%s, %s, %s) : (tensor<1x8x16x16xbf16>, tensor<1x8x16x16xbf16>, tensor<1x8x16x16xbf16>) -> tensor<1x8x16x16xbf16>
  return
}

// -----

func.func @compare_predicate(%a: tensor<1x8x16x16xi32>) {
  // expected-error @+1 {{'wl.compare' op predicate 'less' is not one of lt, le, gt, ge, eq, ne}}
  %0 = "wl.compare"(%a, %a) {predicate = "less"} : (tensor<1x8x16x16xi32>, tensor<1x8x16x16xi32>) -> tensor<1x8x16x16xi1>
  return
}

// -----

func.func @and_of_numbers(%a: tensor<1x8x16x16xi32>, %b: tensor<1x8x16x16xi1>) {
  // expected-error @+1 {{'wl.and' op lhs is tensor<1x8x16x16xi32>; and combines i1 tensors (comparisons)}}
  %0 = "wl.and"(%a, %b) : (tensor<1x8x16x16xi32>, tensor<1x8x16x16xi1>) -> tensor<1x8x16x16xi1>
  return
}

// -----

func.func @gather_index_count(%t: tensor<8x31xf32>, %h: tensor<1x8x16x16xi32>) {
  // expected-error @+1 {{'wl.gather' op table is tensor<8x31xf32>: gather takes one index per dimension (2), got 1}}
  %0 = "wl.gather"(%t, %h) : (tensor<8x31xf32>, tensor<1x8x16x16xi32>) -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @gather_float_index(%t: tensor<8xf32>, %h: tensor<1x8x16x16xf32>) {
  // expected-error @+1 {{'wl.gather' op index0 is tensor<1x8x16x16xf32>; gather indexes with i32 tensors}}
  %0 = "wl.gather"(%t, %h) : (tensor<8xf32>, tensor<1x8x16x16xf32>) -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @gather_bf16_table(%t: tensor<8xbf16>, %h: tensor<1x8x16x16xi32>) {
  // expected-error @+1 {{'wl.gather' op table is tensor<8xbf16>; a modifier reads f32 or i32 tables (convert it first)}}
  %0 = "wl.gather"(%t, %h) : (tensor<8xbf16>, tensor<1x8x16x16xi32>) -> tensor<1x8x16x16xbf16>
  return
}

// -----

// A rank-0 operand broadcasts; i32 meets a float as the float; the result type must say so.
func.func @broadcast_result(%s: tensor<1x8x16x16xbf16>, %i: tensor<1x8x16x16xi32>) {
  %c = "wl.scalar"() {name = "cap"} : () -> tensor<f32>
  %0 = "wl.div"(%s, %c) : (tensor<1x8x16x16xbf16>, tensor<f32>) -> tensor<1x8x16x16xbf16>
  // expected-error @+1 {{'wl.sub' op result element type i32 differs from the operands' bf16}}
  %1 = "wl.sub"(%s, %i) : (tensor<1x8x16x16xbf16>, tensor<1x8x16x16xi32>) -> tensor<1x8x16x16xi32>
  return
}
