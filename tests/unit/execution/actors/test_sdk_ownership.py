"""TransferActorOwnership (0x12): golden bytes, and the SDK's OWNER principal following the new owner."""

from __future__ import annotations

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.system_state import put_account
from cowboy_node.execution.transactions import execute_transaction
from cowboy_node.types.account import Account
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS, Receipt
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import (
    CallActor,
    Instruction,
    TransferActorOwnership,
    instruction_from_cbor,
    instruction_to_cbor,
)
from tests.helpers import ALICE_SK, make_tx
from tests.unit.execution.actors.test_actors_helpers import Env, make_env, returned

BOB_SK = (0xB0B).to_bytes(32, "big")
BOB = private_key_to_address(BOB_SK)

OWNED = '''from cowboy_sdk import OWNER, actor, callable_by, public


@actor
class Vault:
    @callable_by(OWNER)
    def admin(self, payload):
        return b"admin ok"
'''


def test_golden_bytes() -> None:
    ins = TransferActorOwnership(actor=b"\x11" * 20, new_owner=b"\x22" * 20)
    # a3 | 00 12 (kind 0x12) | 01 54 <20 bytes> | 02 54 <20 bytes>   (hand-assembled, RFC 8949)
    golden = bytes.fromhex("a3" "0012" "0154" + "11" * 20 + "0254" + "22" * 20)
    assert encode(instruction_to_cbor(ins)) == golden
    assert instruction_from_cbor(decode(golden)) == ins


_NONCES: dict[bytes, int] = {}


def send(env: Env, sk: bytes, ins: Instruction) -> Receipt:
    sender = private_key_to_address(sk)
    nonce = env.nonce if sk == ALICE_SK else _NONCES.get(sender, 0)
    if sk == ALICE_SK:
        env.nonce += 1
    else:
        _NONCES[sender] = nonce + 1
    env.ctx.cycles_used = env.ctx.cells_used = 0
    return execute_transaction(env.world, make_tx(sk, nonce, ins, cycles_limit=2_000_000, cells_limit=100_000),
                               env.ctx)


def test_only_the_owner_transfers_and_owner_permissions_follow() -> None:
    _NONCES.clear()
    env = make_env()
    put_account(env.world, BOB, Account(10**24, 0))
    _, a = env.deploy(OWNED)
    assert returned(env.call(a, "admin", b"")) == b"admin ok"  # ALICE deployed it: she is OWNER
    r = send(env, BOB_SK, TransferActorOwnership(a, BOB))  # not the owner
    assert (r.status, r.error_code) == (STATUS_FAILED, "not_actor_owner")
    assert send(env, ALICE_SK, TransferActorOwnership(a, bytes(20))).error_code == "invalid_new_owner"
    assert send(env, ALICE_SK, TransferActorOwnership(b"\x99" * 20, BOB)).error_code == "actor_not_found"
    r = send(env, ALICE_SK, TransferActorOwnership(a, BOB))
    assert r.status == STATUS_SUCCESS, r
    assert store.get_actor(env.world, a).creator == BOB  # type: ignore[union-attr]
    r = env.call(a, "admin", b"")  # ALICE is no longer OWNER
    assert r.error_code == "handler_error" and "PermissionDeniedError" in (r.error_message or "")
    assert returned(send(env, BOB_SK, CallActor(a, "admin", b""))) == b"admin ok"
