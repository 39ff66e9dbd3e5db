"""``prefetch(row, t)``: ask the processor to start loading ``row[t]``'s cache line (numba only).

A pass over a few rows of activations is bound by how fast one core pulls the weights in,
and one core keeps only so many loads in flight: while the kernel multiplies the weights it
has, nothing else is fetched unless it asks.  LLVM's ``llvm.prefetch`` (x86's
``prefetcht0``) asks, without waiting for the line and without faulting.  Imported by
:mod:`speclib.lm.kernel` only once numba is known to be there.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, row, t):
    """Prefetch element ``t`` of the one-dimensional array ``row`` into the nearest cache."""
    if not isinstance(row, types.Array) or row.ndim != 1 or not isinstance(t, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, signature.args[0], array, [args[1]], wraparound=False)
        byte = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        # read (0), keep in all cache levels (3), data (1)
        builder.call(fn, [builder.bitcast(pointer, byte), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(row, t), codegen
