# Big integers (past 64 bits, stored with the SDK codec's bignums) and exact integer arithmetic.
from cowboy_sdk import actor, codec, public


def _fact(n):
    out = 1
    for i in range(2, n + 1):
        out = out * i
    return out


@actor
class Numbers:
    @public
    def compute(self, n):
        big = _fact(n)
        out = {"fact": big, "neg": -big, "div": big // 7 ** 20, "mod": big % (2 ** 61 - 1),
               "pow": pow(3, n, 2 ** 127 - 1), "floordiv_neg": (-big) // 1000, "divmod": list(divmod(big, -97)),
               "bits": big.bit_length(), "hex": hex(big), "bytes": big.to_bytes((big.bit_length() + 7) // 8, "big")}
        self.storage["fact:" + str(n)] = big
        self.storage["max_u64_plus_one"] = 2 ** 64
        self.storage["min_i64_minus_one"] = -(2 ** 63) - 1
        return codec.encode(out)
