// The imports of libskainet_iree_plugin.so (src/iree_plugin/) dispatched from a module, the form the
// exporter emits for llvm-cpu: each import is called by the function of a stream.executable, one
// call per workgroup, the workgroup id picking its chunk [begin, end). Bindings reach the import as
// memref<i8> base pointers plus byte offsets (iree_codegen.extract_strided_metadata of an i8 subspan,
// whatever the tensor's element type), scalars as index; the call's operand order is the order of
// the fields of the params struct the plugin reads (src/iree_plugin/imports.hpp).
// Shapes are dynamic here so that tests/record/check_plugin.py compiles once and runs every case;
// @matmul_q8_0_static shows the static form.
//
//   iree-compile plugin_dispatch.mlir --iree-hal-target-device=local \
//       --iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=host -o plugin.vmfb
//   iree-run-module --device=local-task --executable_plugin=build/release/libskainet_iree_plugin.so \
//       --module=plugin.vmfb --function=matmul_q8_0_static --input=1x256xf32=1 --input=48x8x34xi8=1
module @plugin_dispatch {

  // x rows [row_begin, row_end) converted once into the scratch (workgroups over the rows).
  stream.executable private @matmul_prepare_exe {
    stream.executable.export public @matmul_prepare workgroups(%rows: index, %chunk: index) -> (index, index, index) {
      %x = arith.ceildivui %rows, %chunk : index
      %c1 = arith.constant 1 : index
      stream.return %x, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func private @skainet_matmul_prepare(memref<i8>, index, memref<i8>, index, memref<i8>, index,
          index, index, index, index, index, index, index, index) attributes {llvm.bareptr = true}
      func.func @matmul_prepare(%x: !stream.binding, %w: !stream.binding, %s: !stream.binding, %rows: index, %k: index,
          %n: index, %type: index, %order: index, %scratch_bytes: index, %w_bytes: index, %chunk: index, %skew: index) {
        %c0 = arith.constant 0 : index
        %c4 = arith.constant 4 : index
        %xe = arith.muli %rows, %k : index
        %x_bytes = arith.muli %xe, %c4 : index
        %xm = stream.binding.subspan %x[%c0] : !stream.binding -> memref<?xi8>{%x_bytes}
        %wm = stream.binding.subspan %w[%c0] : !stream.binding -> memref<?xi8>{%w_bytes}
        // The test skews the scratch by a few bytes (0 in the exporter's form) to check that the
        // plugin aligns the prepared data itself.
        %sm = stream.binding.subspan %s[%skew] : !stream.binding -> memref<?xi8>{%scratch_bytes}
        %xp, %xo, %xn, %xs = iree_codegen.extract_strided_metadata %xm : memref<?xi8> -> memref<i8>, index, index, index
        %wp, %wo, %wn, %ws = iree_codegen.extract_strided_metadata %wm : memref<?xi8> -> memref<i8>, index, index, index
        %sp, %so, %sn, %ss = iree_codegen.extract_strided_metadata %sm : memref<?xi8> -> memref<i8>, index, index, index
        %id = stream.dispatch.workgroup.id[0] : index
        %begin = arith.muli %id, %chunk : index
        %e = arith.addi %begin, %chunk : index
        %end = arith.minui %e, %rows : index
        func.call @skainet_matmul_prepare(%xp, %xo, %wp, %wo, %sp, %so, %rows, %k, %n, %type, %order, %scratch_bytes,
            %begin, %end) : (memref<i8>, index, memref<i8>, index, memref<i8>, index,
            index, index, index, index, index, index, index, index) -> ()
        return
      }
    }
  }

  // Output features [begin, end) of every row (workgroups over the features).
  stream.executable private @matmul_rows_exe {
    stream.executable.export public @matmul_rows workgroups(%n: index, %chunk: index) -> (index, index, index) {
      %x = arith.ceildivui %n, %chunk : index
      %c1 = arith.constant 1 : index
      stream.return %x, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func private @skainet_matmul_rows(memref<i8>, index, memref<i8>, index, memref<i8>, index, memref<i8>, index,
          index, index, index, index, index, index, index, index) attributes {llvm.bareptr = true}
      func.func @matmul_rows(%x: !stream.binding, %w: !stream.binding, %s: !stream.binding, %y: !stream.binding, %rows: index,
          %k: index, %n: index, %type: index, %order: index, %scratch_bytes: index, %w_bytes: index, %chunk: index,
          %skew: index) {
        %c0 = arith.constant 0 : index
        %c4 = arith.constant 4 : index
        %xe = arith.muli %rows, %k : index
        %x_bytes = arith.muli %xe, %c4 : index
        %ye = arith.muli %rows, %n : index
        %y_bytes = arith.muli %ye, %c4 : index
        %xm = stream.binding.subspan %x[%c0] : !stream.binding -> memref<?xi8>{%x_bytes}
        %wm = stream.binding.subspan %w[%c0] : !stream.binding -> memref<?xi8>{%w_bytes}
        // The test skews the scratch by a few bytes (0 in the exporter's form) to check that the
        // plugin aligns the prepared data itself.
        %sm = stream.binding.subspan %s[%skew] : !stream.binding -> memref<?xi8>{%scratch_bytes}
        %ym = stream.binding.subspan %y[%c0] : !stream.binding -> memref<?xi8>{%y_bytes}
        %xp, %xo, %xn, %xs = iree_codegen.extract_strided_metadata %xm : memref<?xi8> -> memref<i8>, index, index, index
        %wp, %wo, %wn, %ws = iree_codegen.extract_strided_metadata %wm : memref<?xi8> -> memref<i8>, index, index, index
        %sp, %so, %sn, %ss = iree_codegen.extract_strided_metadata %sm : memref<?xi8> -> memref<i8>, index, index, index
        %yp, %yo, %yn, %ys = iree_codegen.extract_strided_metadata %ym : memref<?xi8> -> memref<i8>, index, index, index
        %id = stream.dispatch.workgroup.id[0] : index
        %begin = arith.muli %id, %chunk : index
        %e = arith.addi %begin, %chunk : index
        %end = arith.minui %e, %n : index
        func.call @skainet_matmul_rows(%xp, %xo, %wp, %wo, %sp, %so, %yp, %yo, %rows, %k, %n, %type, %order,
            %scratch_bytes, %begin, %end) : (memref<i8>, index, memref<i8>, index, memref<i8>, index, memref<i8>, index,
            index, index, index, index, index, index, index, index) -> ()
        return
      }
    }
  }

  // Heads [head_begin, head_end) of one layer's attention (workgroups over the heads).
  stream.executable private @attention_exe {
    stream.executable.export public @attention workgroups(%heads: index, %chunk: index) -> (index, index, index) {
      %x = arith.ceildivui %heads, %chunk : index
      %c1 = arith.constant 1 : index
      stream.return %x, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func private @skainet_attention(memref<i8>, index, memref<i8>, index, memref<i8>, index, memref<i8>, index,
          memref<i8>, index, memref<i8>, index, index, index, index, index, index, index, index, index, index, index,
          index, index, index)
          attributes {llvm.bareptr = true}
      func.func @attention(%q: !stream.binding, %kc: !stream.binding, %vc: !stream.binding, %pos: !stream.binding,
          %sinks: !stream.binding, %out: !stream.binding, %n: index, %heads: index, %kv_heads: index, %head_dim: index, %layer: index,
          %ctx: index, %kv_type: index, %scale_bits: index, %window: index, %softcap_bits: index, %delta: index,
          %cache_bytes: index, %chunk: index) {
        %c0 = arith.constant 0 : index
        %c4 = arith.constant 4 : index
        %qw = arith.muli %heads, %head_dim : index
        %qe = arith.muli %n, %qw : index
        %q_bytes = arith.muli %qe, %c4 : index
        %qm = stream.binding.subspan %q[%c0] : !stream.binding -> memref<?xi8>{%q_bytes}
        %km = stream.binding.subspan %kc[%c0] : !stream.binding -> memref<?xi8>{%cache_bytes}
        %vm = stream.binding.subspan %vc[%c0] : !stream.binding -> memref<?xi8>{%cache_bytes}
        %pm = stream.binding.subspan %pos[%c0] : !stream.binding -> memref<?xi8>{%c4}
        %sinks_bytes = arith.muli %heads, %c4 : index
        %sm = stream.binding.subspan %sinks[%c0] : !stream.binding -> memref<?xi8>{%sinks_bytes}
        %om = stream.binding.subspan %out[%c0] : !stream.binding -> memref<?xi8>{%q_bytes}
        %qp, %qo, %qn, %qs = iree_codegen.extract_strided_metadata %qm : memref<?xi8> -> memref<i8>, index, index, index
        %kp, %ko, %kn, %ks = iree_codegen.extract_strided_metadata %km : memref<?xi8> -> memref<i8>, index, index, index
        %vp, %vo, %vn, %vs = iree_codegen.extract_strided_metadata %vm : memref<?xi8> -> memref<i8>, index, index, index
        %pp, %po, %pn, %ps = iree_codegen.extract_strided_metadata %pm : memref<?xi8> -> memref<i8>, index, index, index
        %sp, %so, %sn, %ss = iree_codegen.extract_strided_metadata %sm : memref<?xi8> -> memref<i8>, index, index, index
        %op, %oo, %on, %os = iree_codegen.extract_strided_metadata %om : memref<?xi8> -> memref<i8>, index, index, index
        %id = stream.dispatch.workgroup.id[0] : index
        %begin = arith.muli %id, %chunk : index
        %e = arith.addi %begin, %chunk : index
        %end = arith.minui %e, %heads : index
        func.call @skainet_attention(%qp, %qo, %kp, %ko, %vp, %vo, %pp, %po, %sp, %so, %op, %oo, %n, %heads, %kv_heads,
            %head_dim, %layer, %ctx, %kv_type, %scale_bits, %window, %softcap_bits, %delta, %begin, %end)
            : (memref<i8>, index, memref<i8>, index, memref<i8>, index, memref<i8>, index, memref<i8>, index,
               memref<i8>, index, index, index, index, index, index, index, index, index, index, index, index, index,
               index) -> ()
        return
      }
    }
  }

  // Rows [begin, end) of the ids gathered (workgroups over the ids).
  stream.executable private @gather_rows_exe {
    stream.executable.export public @gather_rows workgroups(%n: index, %chunk: index) -> (index, index, index) {
      %x = arith.ceildivui %n, %chunk : index
      %c1 = arith.constant 1 : index
      stream.return %x, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func private @skainet_gather_rows(memref<i8>, index, memref<i8>, index, memref<i8>, index,
          index, index, index, index, index, index, index) attributes {llvm.bareptr = true}
      func.func @gather_rows(%table: !stream.binding, %ids: !stream.binding, %out: !stream.binding, %n: index, %rows: index,
          %cols: index, %type: index, %order: index, %table_bytes: index, %chunk: index) {
        %c0 = arith.constant 0 : index
        %c4 = arith.constant 4 : index
        %ids_bytes = arith.muli %n, %c4 : index
        %oe = arith.muli %n, %cols : index
        %out_bytes = arith.muli %oe, %c4 : index
        %tm = stream.binding.subspan %table[%c0] : !stream.binding -> memref<?xi8>{%table_bytes}
        %im = stream.binding.subspan %ids[%c0] : !stream.binding -> memref<?xi8>{%ids_bytes}
        %om = stream.binding.subspan %out[%c0] : !stream.binding -> memref<?xi8>{%out_bytes}
        %tp, %to, %tn, %ts = iree_codegen.extract_strided_metadata %tm : memref<?xi8> -> memref<i8>, index, index, index
        %ip, %io, %in, %is = iree_codegen.extract_strided_metadata %im : memref<?xi8> -> memref<i8>, index, index, index
        %op, %oo, %on, %os = iree_codegen.extract_strided_metadata %om : memref<?xi8> -> memref<i8>, index, index, index
        %id = stream.dispatch.workgroup.id[0] : index
        %begin = arith.muli %id, %chunk : index
        %e = arith.addi %begin, %chunk : index
        %end = arith.minui %e, %n : index
        func.call @skainet_gather_rows(%tp, %to, %ip, %io, %op, %oo, %n, %rows, %cols, %type, %order, %begin, %end)
            : (memref<i8>, index, memref<i8>, index, memref<i8>, index, index, index, index, index, index, index, index) -> ()
        return
      }
    }
  }

  // A file-order weight repacked into a kernel-feed order, one 16-row group per workgroup.
  stream.executable private @repack_rows_exe {
    stream.executable.export public @repack_rows workgroups(%groups: index) -> (index, index, index) {
      %c1 = arith.constant 1 : index
      stream.return %groups, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func private @skainet_repack_rows(memref<i8>, index, memref<i8>, index, index, index, index, index, index,
          index) attributes {llvm.bareptr = true}
      func.func @repack_rows(%src: !stream.binding, %dst: !stream.binding, %rows: index, %k: index, %type: index,
          %order: index, %bytes: index, %groups: index) {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %sm = stream.binding.subspan %src[%c0] : !stream.binding -> memref<?xi8>{%bytes}
        %dm = stream.binding.subspan %dst[%c0] : !stream.binding -> memref<?xi8>{%bytes}
        %sp, %so, %sn, %ss = iree_codegen.extract_strided_metadata %sm : memref<?xi8> -> memref<i8>, index, index, index
        %dp, %do, %dn, %ds = iree_codegen.extract_strided_metadata %dm : memref<?xi8> -> memref<i8>, index, index, index
        %id = stream.dispatch.workgroup.id[0] : index
        %end = arith.addi %id, %c1 : index
        func.call @skainet_repack_rows(%sp, %so, %dp, %do, %rows, %k, %type, %order, %id, %end)
            : (memref<i8>, index, memref<i8>, index, index, index, index, index, index, index) -> ()
        return
      }
    }
  }

  // y = x w^T for a weight of `type` in `order` given as its bytes; row_chunk x rows per prepare
  // workgroup, col_chunk output features per rows workgroup.
  func.func @matmul(%x: tensor<?x?xf32>, %w: tensor<?xi8>, %n64: i64, %type64: i64, %order64: i64,
      %scratch_bytes64: i64, %row_chunk64: i64, %col_chunk64: i64, %skew64: i64) -> tensor<?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %rows = tensor.dim %x, %c0 : tensor<?x?xf32>
    %k = tensor.dim %x, %c1 : tensor<?x?xf32>
    %w_bytes = tensor.dim %w, %c0 : tensor<?xi8>
    %n = arith.index_cast %n64 : i64 to index
    %type = arith.index_cast %type64 : i64 to index
    %order = arith.index_cast %order64 : i64 to index
    %sb = arith.index_cast %scratch_bytes64 : i64 to index
    %rc = arith.index_cast %row_chunk64 : i64 to index
    %cc = arith.index_cast %col_chunk64 : i64 to index
    %skew = arith.index_cast %skew64 : i64 to index
    %sbs = arith.addi %sb, %skew : index
    %s = flow.dispatch @matmul_prepare_exe::@matmul_prepare[%rows, %rc](%x, %w, %rows, %k, %n, %type, %order, %sb,
        %w_bytes, %rc, %skew) : (tensor<?x?xf32>{%rows, %k}, tensor<?xi8>{%w_bytes}, index, index, index, index, index,
        index, index, index, index) -> tensor<?xi8>{%sbs}
    %y = flow.dispatch @matmul_rows_exe::@matmul_rows[%n, %cc](%x, %w, %s, %rows, %k, %n, %type, %order, %sb, %w_bytes,
        %cc, %skew) : (tensor<?x?xf32>{%rows, %k}, tensor<?xi8>{%w_bytes}, tensor<?xi8>{%sbs}, index, index, index, index,
        index, index, index, index, index) -> tensor<?x?xf32>{%rows, %n}
    return %y : tensor<?x?xf32>
  }

  // The same, for the one case the exporter's static form is shown by: Q8_0 [48, 256] row-major,
  // one x row, the weight as tensor<rows x blocks x block_bytes x i8>, a generous scratch.
  func.func @matmul_q8_0_static(%x: tensor<1x256xf32>, %w: tensor<48x8x34xi8>) -> tensor<1x48xf32> {
    %rows = arith.constant 1 : index
    %k = arith.constant 256 : index
    %n = arith.constant 48 : index
    %type = arith.constant 8 : index
    %order = arith.constant 0 : index
    %sb = arith.constant 2048 : index
    %w_bytes = arith.constant 13056 : index
    %rc = arith.constant 1 : index
    %cc = arith.constant 16 : index
    %skew = arith.constant 0 : index
    %s = flow.dispatch @matmul_prepare_exe::@matmul_prepare[%rows, %rc](%x, %w, %rows, %k, %n, %type, %order, %sb,
        %w_bytes, %rc, %skew) : (tensor<1x256xf32>, tensor<48x8x34xi8>, index, index, index, index, index, index, index,
        index, index) -> tensor<2048xi8>
    %y = flow.dispatch @matmul_rows_exe::@matmul_rows[%n, %cc](%x, %w, %s, %rows, %k, %n, %type, %order, %sb, %w_bytes,
        %cc, %skew) : (tensor<1x256xf32>, tensor<48x8x34xi8>, tensor<2048xi8>, index, index, index, index, index, index,
        index, index, index) -> tensor<1x48xf32>
    return %y : tensor<1x48xf32>
  }

  // Attention of q [n, heads * head_dim] over layer `layer` of caches given as bytes
  // ([layers, ctx, kv_heads * head_dim] of kv_type), queries at pos + delta, with one sink score per
  // head (-inf: none).
  func.func @attention(%q: tensor<?x?xf32>, %kc: tensor<?xi8>, %vc: tensor<?xi8>, %pos: tensor<i32>,
      %sinks: tensor<?xf32>, %heads64: i64,
      %kv_heads64: i64, %head_dim64: i64, %layer64: i64, %ctx64: i64, %kv_type64: i64, %scale_bits64: i64,
      %window64: i64, %softcap_bits64: i64, %delta64: i64, %head_chunk64: i64) -> tensor<?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = tensor.dim %q, %c0 : tensor<?x?xf32>
    %width = tensor.dim %q, %c1 : tensor<?x?xf32>
    %cache_bytes = tensor.dim %kc, %c0 : tensor<?xi8>
    %sink_count = tensor.dim %sinks, %c0 : tensor<?xf32>
    %heads = arith.index_cast %heads64 : i64 to index
    %kv_heads = arith.index_cast %kv_heads64 : i64 to index
    %head_dim = arith.index_cast %head_dim64 : i64 to index
    %layer = arith.index_cast %layer64 : i64 to index
    %ctx = arith.index_cast %ctx64 : i64 to index
    %kv_type = arith.index_cast %kv_type64 : i64 to index
    %scale_bits = arith.index_cast %scale_bits64 : i64 to index
    %window = arith.index_cast %window64 : i64 to index
    %softcap_bits = arith.index_cast %softcap_bits64 : i64 to index
    %delta = arith.index_cast %delta64 : i64 to index
    %hc = arith.index_cast %head_chunk64 : i64 to index
    %out = flow.dispatch @attention_exe::@attention[%heads, %hc](%q, %kc, %vc, %pos, %sinks, %n, %heads, %kv_heads,
        %head_dim, %layer, %ctx, %kv_type, %scale_bits, %window, %softcap_bits, %delta, %cache_bytes, %hc)
        : (tensor<?x?xf32>{%n, %width}, tensor<?xi8>{%cache_bytes}, tensor<?xi8>{%cache_bytes}, tensor<i32>,
           tensor<?xf32>{%sink_count}, index, index, index, index, index, index, index, index, index, index, index, index, index)
        -> tensor<?x?xf32>{%n, %width}
    return %out : tensor<?x?xf32>
  }

  // out[i] = row ids[i] of a [rows, cols] table of `type` in `order` given as bytes.
  func.func @gather_rows(%table: tensor<?xi8>, %ids: tensor<?xi32>, %rows64: i64, %cols64: i64, %type64: i64,
      %order64: i64, %chunk64: i64) -> tensor<?x?xf32> {
    %c0 = arith.constant 0 : index
    %table_bytes = tensor.dim %table, %c0 : tensor<?xi8>
    %n = tensor.dim %ids, %c0 : tensor<?xi32>
    %rows = arith.index_cast %rows64 : i64 to index
    %cols = arith.index_cast %cols64 : i64 to index
    %type = arith.index_cast %type64 : i64 to index
    %order = arith.index_cast %order64 : i64 to index
    %chunk = arith.index_cast %chunk64 : i64 to index
    %out = flow.dispatch @gather_rows_exe::@gather_rows[%n, %chunk](%table, %ids, %n, %rows, %cols, %type, %order, %table_bytes,
        %chunk) : (tensor<?xi8>{%table_bytes}, tensor<?xi32>{%n}, index, index, index, index, index, index, index)
        -> tensor<?x?xf32>{%n, %cols}
    return %out : tensor<?x?xf32>
  }

  // A [rows, k] weight of `type` in file order repacked into `order`.
  func.func @repack_rows(%src: tensor<?xi8>, %rows64: i64, %k64: i64, %type64: i64, %order64: i64) -> tensor<?xi8> {
    %c0 = arith.constant 0 : index
    %c15 = arith.constant 15 : index
    %c16 = arith.constant 16 : index
    %bytes = tensor.dim %src, %c0 : tensor<?xi8>
    %rows = arith.index_cast %rows64 : i64 to index
    %k = arith.index_cast %k64 : i64 to index
    %type = arith.index_cast %type64 : i64 to index
    %order = arith.index_cast %order64 : i64 to index
    %r15 = arith.addi %rows, %c15 : index
    %groups = arith.divui %r15, %c16 : index
    %dst = flow.dispatch @repack_rows_exe::@repack_rows[%groups](%src, %rows, %k, %type, %order, %bytes, %groups)
        : (tensor<?xi8>{%bytes}, index, index, index, index, index, index) -> tensor<?xi8>{%bytes}
    return %dst : tensor<?xi8>
  }
}
