# Determinism corpus: the peer actor (target of call_actor, send_message and transfer_balance).
import pvm_host


def echo(payload):
    pvm_host.set_state(b"echo", payload)
    return payload.decode().upper().encode()


def fail(payload):
    pvm_host.set_state(b"never", b"1")
    return {"\u00e9": 1}["\u00ea"]


def handle_message(payload):
    n = int(pvm_host.get_state(b"messages") or b"0") + 1
    pvm_host.set_state(b"messages", str(n).encode())
    pvm_host.set_state(b"message:" + str(n).encode(), payload.decode().casefold().encode())
    return b""
