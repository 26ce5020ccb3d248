# ruff: noqa: UP031, B018, E501  (actor source: %-formatting and bare expressions are what it tests)
# Determinism corpus: one actor, one case per call (handler "run", payload = the case name).
# Every case's result is stored under b"r:<case>" as repr() text and emitted as an event, so
# the state root and the receipts pin it.  Strings use non-ASCII text on purpose: the table-
# dependent str methods must give Unicode 14.0.0 results on every interpreter.
import json
import math

import pvm_host

GREEK = "\u039f\u0394\u039f\u03a3 \u1f88\u03a3\u0301 \u03c3\u03a3"
MIXED = "\u00e9t\u00e9 \u00df\u0130 \ufb01n \u01c5ungla \u0345 \u1e9e \u2168 \u24d0"
NEW15 = "a\U0001fae8\U00011f04\U0001e030b"  # assigned in Unicode 15.0: unassigned in 14.0
SPACES = "\u3000 a\u1680b\u2000c\u00a0\u2028d\u0085e\u200b f \u3000"
DIGITS = "\u0663\u0664\u0665 \U0001d7d9 \uff11\uff12 \u00b2 \u2155 \u2168 \u0f33"
PEER = bytes.fromhex("00" * 20)


class Fault(Exception):
    pass


def case_upper():
    return [GREEK.upper(), MIXED.upper(), NEW15.upper()]


def case_lower():
    return [GREEK.lower(), MIXED.lower(), "\u0391\u03a3\u0301".lower(), "\u03a3".lower()]


def case_casefold():
    return [GREEK.casefold(), MIXED.casefold(), "Stra\u00dfe".casefold() == "STRASSE".casefold()]


def case_title():
    return [GREEK.title(), MIXED.title(), "\u01c6ungla \u01c4ungla".title()]


def case_capitalize():
    return [GREEK.capitalize(), MIXED.capitalize(), "\u1f80\u03a3".capitalize()]


def case_swapcase():
    return [GREEK.swapcase(), MIXED.swapcase()]


def case_isalpha():
    return [c.isalpha() for c in MIXED + NEW15 + "\u0870\u08be"]


def case_numeric_predicates():
    return [[c.isdecimal(), c.isdigit(), c.isnumeric()] for c in DIGITS + NEW15]


def case_isalnum():
    return [w.isalnum() for w in (MIXED + " " + DIGITS + " " + NEW15).split()]


def case_isspace():
    return [c.isspace() for c in SPACES]


def case_isprintable():
    return [c.isprintable() for c in GREEK + SPACES + NEW15 + "\U0001fae0\u0378\ue000\u00ad"]


def case_isidentifier():
    return [w.isidentifier() for w in ("caf\u00e9", "\u2118x", "\u00b7x", "x\u00b7", "\u0661x", "x\U0001e030",
                                       "\U00011f04", "_\u0300", "a\u200d")]


def case_case_predicates():
    words = (MIXED + " " + GREEK + " \u01c5a \u01c4A \u2168x \u24d0b").split()
    return [[w.islower(), w.isupper(), w.istitle()] for w in words]


def case_split():
    return [SPACES.split(), SPACES.split(None, 2), SPACES.rsplit(None, 2), SPACES.split(" ")]


def case_strip():
    return [SPACES.strip(), SPACES.lstrip(), SPACES.rstrip(), SPACES.strip(" \u3000")]


def case_splitlines():
    text = "a\u2028b\r\nc\u0085d\x1ce\u2029f\rg\nh\u000bi\u000c"
    return [text.splitlines(), text.splitlines(True)]


def case_repr():
    return [repr(GREEK + SPACES + NEW15), str([NEW15, SPACES]), repr({"\u00e9": ["\u200b"]})]


def case_percent_and_fstrings():
    return ["%r|%s|%a" % (NEW15, NEW15, NEW15), f"{SPACES!r} {NEW15!a} {MIXED:>40}",
            "%(k)r and %(k)s" % {"k": NEW15}]


def case_int_from_text():
    return [int("\u0663\u0664\u0665"), int(" \U0001d7d9\uff12 "), int("\uff11\uff10", 16), int("-\u0661_\u0662")]


def case_float_from_text():
    return [float("\u0661.\u0665"), float("\u3000-\u0662e\u0663 "), float("\uff11\uff10.25")]


def case_bad_int():
    return int("\u0663\U0001fae8")


def case_bad_float():
    return float("\u00b2")


def case_sorting_text():
    words = (MIXED + " " + GREEK + " " + NEW15 + " Zebra apple \u00c5ngstr\u00f6m").split()
    return [sorted(words), sorted(words, key=len), sorted(words, key=lambda w: w.casefold(), reverse=True)]


def case_codecs():
    raw = (MIXED + NEW15).encode("utf-8")
    return [raw.hex(), raw.decode("utf-8") == MIXED + NEW15, MIXED.encode("ascii", "replace"),
            MIXED.encode("latin-1", "ignore"), b"\xff\xfe".decode("utf-8", "replace")]


def case_big_power():
    a = 3 ** 1000
    b = (a * a) // 7 ** 300
    return [a % 1000000007, b.bit_length(), str(b)[:40], str(b)[-40:], pow(3, 10 ** 9, 10 ** 9 + 7)]


def case_big_text():
    n = int("9" * 600)
    return [len(str(n * n)), int(str(n)[::-1]) % 97, hex(n)[:30], int("-0x" + "f" * 200, 16) % 1013]


def case_big_bitops():
    a = -(1 << 3000) + 12345
    return [a >> 2900, a & 0xFFFF, (a ^ (a >> 7)) % 65521, ~a % 999, divmod(a, 10 ** 100)[1], -7 // 2, -7 % 2]


def case_int_bytes():
    n = 2 ** 2000 - 1
    data = n.to_bytes(251, "big")
    return [int.from_bytes(data, "little") % 1000003, (255).to_bytes(2, "little"), int.from_bytes(b"\x80", "big")]


def case_integer_math():
    return [math.isqrt(10 ** 300) % 10 ** 9, math.gcd(2 ** 400 - 1, 2 ** 300 - 1), math.factorial(200) % 10 ** 12,
            math.comb(400, 200) % 10 ** 12, math.perm(50, 20), math.lcm(12, 18, 40)]


def case_int_too_large():
    return 2 ** 5000


def case_float_arithmetic():
    x = 0.1 + 0.2
    return [x, x == 0.3, 1 / 3, math.sqrt(2.0), 1e308 * 10, -0.0, 7.0 // -2, 7.5 % -2,
            float("inf") - float("inf") != 0, 1e-320, 2.5e-5 * 3]


def case_float_text():
    x = 1 / 7
    return [repr(x), str(1e22), str(1e16), f"{x:.17g}", f"{x:e}", "%.3f|%g|%08.2f" % (x, 1e-5, -x), f"{12345.678:,.2f}",
            round(2.5), round(3.5), round(2.675, 2), round(-0.5)]


def case_float_math():
    return [math.fsum([0.1] * 10), math.floor(-2.5), math.ceil(2.000001), math.fmod(-7.5, 2), math.frexp(1e300),
            math.ldexp(0.75, -1070), math.copysign(3, -0.0), math.modf(-3.25), math.isnan(float("nan")), math.trunc(-9.9)]


def case_float_hex():
    return [(0.1).hex(), float.fromhex("0x1.999999999999ap-4"), (1e308).hex(), float.fromhex("-0x1p-1074"),
            (3.75).as_integer_ratio(), float(2 ** 60).is_integer(), int(1e20), int(-2.9)]


def case_sorting():
    rows = [(3, "b"), (1, "z"), (3, "a"), (2, "\u00e9"), (1, "a"), (2, "e")]
    stable = sorted(rows, key=lambda r: r[0])
    data = [5, -1, 3.5, 2, -7.25, 0, 1e10, -0.0]
    data.sort(reverse=True)
    return [stable, sorted(rows), sorted(rows, key=lambda r: r[1], reverse=True), data,
            sorted([[2, 1], [1, 9], [2, 0]]), max(rows), min(data)]


def case_dict_order():
    d = {}
    for k in ("z", "\u00e9", "a", "\u03a3", "m"):
        d[k] = len(d)
    del d["a"]
    d["a"] = 99
    d.update({"b": 1, "z": -1})
    d.setdefault("c", [])
    popped = d.pop("m")
    return [list(d.items()), popped, {k: v for k, v in sorted(d.items()) if k != "c"}, dict.fromkeys("ba", 0)]


def case_dict_nested():
    tree = {"b": {"y": [1, 2], "x": {"\u00e9": None}}, "a": (1.5, True)}
    keys = []
    for k, v in tree.items():
        keys.append(k)
        if isinstance(v, dict):
            keys.extend(sorted(v))
    return [keys, tree, list(tree["b"].values()), 1 in {1: 2}, tree.get("zz", "default")]


def case_json():
    obj = {"\u00e9": [1, 2.5, None, True], "b": {"\u03a3": "\u200b\U0001fae8"}, "a": -(2 ** 70)}
    return [json.dumps(obj), json.dumps(obj, sort_keys=True, ensure_ascii=False), json.dumps(obj, indent=2)[:60],
            json.loads('{"x": [1, 2.5e3, "\\u00e9"], "y": 123456789012345678901234567890}')]


def case_exceptions():
    out = []
    try:
        raise Fault("f\u00e4ult", 7)
    except Fault as e:
        out.append(repr(e))
        out.append(str(e))
    try:
        [1, 2][5]
    except IndexError as e:
        out.append(str(e))
    try:
        {"\u00e9": 1}["\U0001fae8"]
    except KeyError as e:
        out.append(str(e))
    try:
        1 / 0
    except ArithmeticError as e:
        out.append(str(e))
    try:
        int("x\u00e9")
    except ValueError as e:
        out.append(str(e))
    try:
        raise ValueError("outer") from KeyError("inner")
    except ValueError as e:
        out.append(str(e))
    return out


def case_uncaught_key_error():
    return {"\u00e9": 1}["\U0001fae8\u3000"]


def case_uncaught_zero_division():
    return 10 // (len(GREEK) - len(GREEK))


def case_assert():
    assert GREEK.lower() == GREEK, "not lowercase: %r" % NEW15
    return None


def case_out_of_cycles():
    n = 0
    while True:
        n += 1


def case_recursion():
    def down(k):
        return down(k + 1)
    return down(0)


def case_memory():
    return "\u00e9" * (1 << 25)


def case_context():
    ctx = pvm_host.context()
    return [sorted(ctx), ctx["block_height"], ctx["chain_id"], len(ctx["tx_hash"]), ctx["timestamp_ms"]]


def case_addresses():
    return [pvm_host.current_block(), pvm_host.self_address().hex(), pvm_host.actor_owner().hex()]


def case_state():
    pvm_host.set_state(b"k:\xce\xa3", "\u03a3".encode())
    pvm_host.set_state(b"k:b", b"2")
    pvm_host.set_state(b"k:a", b"1")
    before = pvm_host.get_state(b"k:b")
    pvm_host.delete_state(b"k:b")
    return [before, pvm_host.get_state(b"k:b"), pvm_host.get_state(b"missing")]


def case_scan():
    return pvm_host.scan_state_prefix(b"k:", 10)


def case_keccak():
    return [pvm_host.keccak256(b"").hex(), pvm_host.keccak256(MIXED.encode()).hex()]


def case_signatures():
    pk = bytes.fromhex("03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8")
    sig = bytes.fromhex("c90c7e3083631811f9a9a85ae335760ef71045b35f89b94f653498450ff898f6"
                        "6860952d64d1c4ba9ad8fa2d2859cb473c9c949c752569f37d52be6ef6bdad03")
    msg = b"cowboy determinism corpus"
    out = [pvm_host.verify_signature(2, pk, msg, sig), pvm_host.verify_signature(2, pk, msg + b"!", sig),
           pvm_host.verify_signature(1, b"\x11" * 20, msg, b"\x01" * 64 + b"\x00")]
    try:
        pvm_host.verify_signature(3, pk, msg, sig)
    except ValueError as e:
        out.append(str(e))
    return out


def case_events():
    r = pvm_host.emit_event("corpus.\u00e9v\u00e9nement", json.dumps({"x": NEW15}).encode())
    return sorted(r)


def peer():
    return pvm_host.get_state(b"peer")


def case_call_actor():
    out = [pvm_host.call_actor(peer(), "echo", "\u00df\u0130 \u03c3".encode(), 200000)]
    try:
        pvm_host.call_actor(peer(), "fail", b"", 200000)
    except pvm_host.HostError as e:
        out.append(e.name)
    try:
        pvm_host.call_actor(peer(), "missing", b"", 200000)
    except pvm_host.HostError as e:
        out.append(e.name)
    return out


def case_send_message():
    pvm_host.send_message(peer(), "\u1e9e\u03a3 MESSAGE".encode())
    pvm_host.send_message(peer(), "second \u0130".encode())
    return True


def case_transfer():
    pvm_host.transfer_balance(peer(), 12345)
    return True


def case_submit_job():
    return pvm_host.submit_job(b'{"not": "a job"}')


def case_schedule_timer():
    a = pvm_host.schedule_timer(pvm_host.current_block() + 2, "\u03a3 timer".encode())
    b = pvm_host.schedule_timer_ex(pvm_host.current_block() + 3, b"ex", b"", 300000)
    c = pvm_host.schedule_timer(pvm_host.current_block() + 4, b"cancelled")
    pvm_host.extend_timer(b, pvm_host.current_block() + 5)
    pvm_host.cancel_timer(c)
    pvm_host.set_state(b"timers", a + b + c)
    return [len(a), a == b]


def case_reserved_state():
    out = []
    try:
        pvm_host.set_reserved_state(b"other", b"x")
    except ValueError as e:
        out.append(str(e))
    try:
        pvm_host.delete_reserved_state(b"other")
    except ValueError as e:
        out.append(str(e))
    return out


def case_get_timers():
    timers = pvm_host.get_timers()
    return [[sorted(t) for t in timers.values()], [t["height"] for t in timers.values()]]


def case_subscriptions():
    sid = pvm_host.subscribe_event(peer(), "echoed", "on_peer_event", 200000, 10)
    out = [len(sid), pvm_host.update_bid(sid, 5), pvm_host.topup_subscription(sid, 1000)]
    out.append(pvm_host.unsubscribe_event(sid))
    pvm_host.force_unsubscribe_event(b"\x00" * 33)
    try:
        pvm_host.update_bid(sid, 1)
    except pvm_host.HostError as e:
        out.append(e.name)
    return out


def case_fork():
    child = pvm_host.fork_actor(1000)
    return [len(child), child == pvm_host.self_address()]


def on_peer_event(payload):
    return b""


def handle_timer(payload):
    n = int(pvm_host.get_state(b"fired") or b"0") + 1
    pvm_host.set_state(b"fired", str(n).encode())
    pvm_host.set_state(b"fired:" + str(n).encode(), payload.decode().lower().encode())
    return b""


CASES = {
    "upper": case_upper, "lower": case_lower, "casefold": case_casefold, "title": case_title,
    "capitalize": case_capitalize, "swapcase": case_swapcase, "isalpha": case_isalpha,
    "numeric_predicates": case_numeric_predicates, "isalnum": case_isalnum, "isspace": case_isspace,
    "isprintable": case_isprintable, "isidentifier": case_isidentifier, "case_predicates": case_case_predicates,
    "split": case_split, "strip": case_strip, "splitlines": case_splitlines, "repr": case_repr,
    "percent_and_fstrings": case_percent_and_fstrings, "int_from_text": case_int_from_text,
    "float_from_text": case_float_from_text, "bad_int": case_bad_int, "bad_float": case_bad_float,
    "sorting_text": case_sorting_text, "codecs": case_codecs, "big_power": case_big_power,
    "big_text": case_big_text, "big_bitops": case_big_bitops, "int_bytes": case_int_bytes,
    "integer_math": case_integer_math, "int_too_large": case_int_too_large,
    "float_arithmetic": case_float_arithmetic, "float_text": case_float_text, "float_math": case_float_math,
    "float_hex": case_float_hex, "sorting": case_sorting, "dict_order": case_dict_order,
    "dict_nested": case_dict_nested, "json": case_json, "exceptions": case_exceptions,
    "uncaught_key_error": case_uncaught_key_error, "uncaught_zero_division": case_uncaught_zero_division,
    "assert": case_assert, "out_of_cycles": case_out_of_cycles, "recursion": case_recursion,
    "memory": case_memory, "context": case_context, "addresses": case_addresses, "state": case_state,
    "scan": case_scan, "keccak": case_keccak, "signatures": case_signatures, "events": case_events,
    "call_actor": case_call_actor, "send_message": case_send_message, "transfer": case_transfer,
    "submit_job": case_submit_job, "schedule_timer": case_schedule_timer, "reserved_state": case_reserved_state,
    "get_timers": case_get_timers, "subscriptions": case_subscriptions, "fork": case_fork,
}


def init(payload):
    pvm_host.set_state(b"peer", payload)
    return b""


def run(payload):
    case = payload.decode()
    result = CASES[case]()
    text = repr(result).encode("utf-8")
    pvm_host.set_state(b"r:" + payload, text)
    pvm_host.emit_event("case", pvm_host.keccak256(text))
    return text
