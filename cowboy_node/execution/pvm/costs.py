"""The PVM cost table (consensus-critical; documented in ``docs/pvm.md``).

Static costs are added up at deploy time and charged at the start of each block of
statements; dynamic costs depend on data sizes and are charged by the runtime helpers
*before* the work is done (or right after, for work already bounded by an existing
object's size).  Every number here is part of the protocol: changing one changes
cycle counts, hence receipts and state roots.
"""

from __future__ import annotations

# --- static costs (charged per block, computed from the source) -------------------
#: Every statement of the source (including ``pass``, ``def``, ``import``...).
STMT = 1
#: Every call expression written in the source, every decorator, every class creation.
CALL = 5
#: Every iteration of a ``for``/``while`` loop or of a comprehension ``for`` clause.
LOOP_ITER = 2
#: Every entry into an actor function or lambda.
FUNC_ENTRY = 2

#: Every call of a ``cowboy_sdk`` entry point (trusted SDK code runs unmetered; its host calls
#: are charged by the host), and every dispatch to an ``@actor`` class method.
SDK_CALL = 100

# --- dynamic costs ------------------------------------------------------------------
#: Per collection item produced, copied, visited or compared by a bulk operation.
ITEM = 1
#: str/bytes work: one cycle per ``1 << BYTES_SHIFT`` bytes (or code points) produced or scanned.
BYTES_SHIFT = 3
#: str/bytes compared inside a structure walk: one cycle per ``1 << CMP_SHIFT`` units.
CMP_SHIFT = 8
#: Integers are costed in 64-bit words.
INT_WORD_BITS = 64
#: Multiplication/division: ``words(a) * words(b) >> INT_MUL_SHIFT``.
INT_MUL_SHIFT = 4
#: Decimal conversion (str(int), int(str)): ``digits**2 >> INT_CONV_SHIFT``.
INT_CONV_SHIFT = 12
#: Non-ASCII text through the pinned Unicode tables (``unistr``: case mappings, predicates, whitespace,
#: line breaks, ``repr``, ``int``/``float`` of text): per code point, on top of the method's own cost.
#: The pinned implementation runs 10-60x slower than CPython's C methods on such text (bench/pvm_unicode.py).
UNICODE_CHAR = 2
#: Each context-dependent step of the pinned implementation (a final-sigma decision, a title() run, an
#: escaped run of repr()), which runs in Python: about a microsecond each.
UNICODE_STEP = 16


def bytes_cost(n: int) -> int:
    """Cost of producing or scanning ``n`` bytes / code points."""
    return n >> BYTES_SHIFT


def items_cost(n: int) -> int:
    """Cost of producing, copying or visiting ``n`` collection items."""
    return n * ITEM


def words(bits: int) -> int:
    """64-bit words of an integer of ``bits`` bits (at least 1)."""
    return (bits + INT_WORD_BITS - 1) // INT_WORD_BITS or 1


def mul_cost(a_bits: int, b_bits: int) -> int:
    """Multiplication, division or modulo of integers of the given sizes."""
    return (words(a_bits) * words(b_bits)) >> INT_MUL_SHIFT


def pow_cost(result_bits: int, exp_bits: int) -> int:
    """``a ** e``: one squaring of the result size per exponent bit."""
    return exp_bits * mul_cost(result_bits, result_bits)


def modpow_cost(mod_bits: int, exp_bits: int) -> int:
    """``pow(a, e, m)``: two modular products per exponent bit."""
    return 2 * exp_bits * mul_cost(mod_bits, mod_bits)


def conv_cost(digits: int) -> int:
    """Decimal conversion between int and str (quadratic in CPython)."""
    return (digits * digits) >> INT_CONV_SHIFT


def sort_cost(n: int) -> int:
    """Sorting ``n`` items: ``n * bit_length(n)`` comparisons."""
    return n * n.bit_length()
