#!/usr/bin/env python3
"""Mutation check of the consensus rules (issue 30 §4): remove each rule in turn and check that its tests fail.

Every entry of :data:`MUTATIONS` names a rule, the file holding it, an exact source snippet (which must occur
exactly once, so the table cannot silently rot when the engine changes), the mutated snippet that removes the rule,
and the pytest node ids expected to fail without it. The repository is copied once to a temporary directory; each
mutation is applied to the copy, the listed tests run there (the copy's ``cowboy_node`` is imported, checked), and
the file is restored before the next one. The working tree is never touched.

Output: one JSON object — per rule ``killed`` (at least one listed test failed) or ``SURVIVED``, with the listed
tests that failed and those that did not. Exit status 1 if any rule survived, 2 if the table is stale (a snippet
not found exactly once) or the unmutated baseline does not pass.

    .venv/bin/python scripts/consensus_mutations.py [--only RULE ...] [--list]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = "cowboy_node/consensus/simplex/engine.py"
RULES = "tests/unit/consensus/test_engine_rules.py"
JOURNAL = "tests/unit/consensus/test_vote_journal.py"
FLOOD = "tests/unit/consensus/test_engine_flood_bounds.py"
GUARD = "tests/unit/node/test_double_sign_guard.py"
ENGINE_TESTS = "tests/unit/consensus/test_simplex_engine.py"
JOURNAL_SRC = "cowboy_node/consensus/journal.py"
SYNC_CLIENT = "cowboy_node/node/sync_client.py"
SYNC_TESTS = "tests/unit/node/test_sync_client.py"
LATE = "tests/unit/consensus/test_engine_late_activity.py"
WAN = "tests/unit/consensus/test_simplex_wan.py"


@dataclass(frozen=True)
class Mutation:
    rule: str
    file: str
    original: str
    mutated: str
    tests: tuple[str, ...]


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "skipped views must be nullified in a proposal's justification", ENGINE,
        "if (s := self._views.get(w)) is None or s.nullification is None]",
        "if False]",
        (f"{RULES}::test_proposal_skipping_a_view_without_its_nullification_is_not_notarized",),
    ),
    Mutation(
        "parent digest check", ENGINE,
        "if cert.proposal.payload != p.parent:\n                return False",
        "if False:\n                return False",
        (f"{RULES}::test_proposal_whose_parent_digest_differs_from_the_certified_block_is_nullified",),
    ),
    Mutation(
        "parent below floor check", ENGINE,
        "if p.parent_view < self.finalized_view:",
        "if False:",
        (f"{RULES}::test_proposal_on_a_parent_below_the_finalized_view_is_nullified",),
    ),
    Mutation(
        "floor digest check", ENGINE,
        "if p.parent != self.finalized_digest:",
        "if False:",
        (f"{RULES}::test_proposal_on_the_floor_view_with_another_digest_is_nullified",),
    ),
    Mutation(
        "certificate signature verification", ENGINE,
        "elif not self.scheme.verify_certificate(cert.vote_message(), cert.signature):",
        "elif False:",
        (f"{RULES}::test_certificate_with_a_forged_signature_is_rejected",),
    ),
    Mutation(
        "certificate seed verification", ENGINE,
        "elif seed is None and not self.scheme.verify_certificate(seed_message(r), cert.seed):",
        "elif False:",
        (f"{RULES}::test_certificate_with_a_forged_seed_is_rejected",),
    ),
    Mutation(
        "certificate seed matches the round's known seed", ENGINE,
        "if seed is not None and cert.seed != seed:",
        "if False:",
        (f"{RULES}::test_certificate_whose_seed_differs_from_the_rounds_known_seed_is_rejected",),
    ),
    Mutation(
        "no nullify after finalize", ENGINE,
        "if v.my_nullify is not None or v.my_finalize is not None or v.round.view <= self._vote_above:",
        "if v.my_nullify is not None or v.round.view <= self._vote_above:",
        (f"{RULES}::test_no_nullify_after_finalize_even_when_the_view_times_out",),
    ),
    Mutation(
        "restoring a journaled finalize", ENGINE,
        "            v.my_finalize = vote\n            v.finalizes[vote.signer] = vote",
        "            v.finalizes[vote.signer] = vote",
        (f"{RULES}::test_a_journaled_finalize_is_restored",
         f"{RULES}::test_no_nullify_after_finalize_even_when_the_view_times_out"),
    ),
    Mutation(
        "adopting a proposal only from the view's leader", ENGINE,
        "vote = v.notarizes.get(v.leader)",
        "vote = next(iter(v.notarizes.values()), None)",
        (f"{RULES}::test_proposal_is_adopted_only_from_the_views_leader",),
    ),
    Mutation(
        "restoring a journaled notarize", ENGINE,
        "            v.my_notarize = vote\n            v.notarizes[vote.signer] = vote",
        "            v.notarizes[vote.signer] = vote",
        (f"{RULES}::test_a_journaled_notarize_is_restored",
         f"{RULES}::test_never_a_second_notarize_in_a_view_even_if_the_host_verifies_another_proposal",
         f"{ENGINE_TESTS}::test_restart_with_journal_never_signs_a_conflicting_vote",
         f"{JOURNAL}::test_restart_from_journal_never_notarizes_a_different_proposal"),
    ),
    Mutation(
        "never a second notarize in a view", ENGINE,
        "if v.my_notarize is not None or v.my_nullify is not None or v.round.view <= self._vote_above:\n"
        "            return\n        vote = Notarize(",
        "if v.my_nullify is not None or v.round.view <= self._vote_above:\n"
        "            return\n        vote = Notarize(",
        (f"{RULES}::test_never_a_second_notarize_in_a_view_even_if_the_host_verifies_another_proposal",),
    ),
    Mutation(
        "an abstaining validator (double-sign guard) signs no notarize", ENGINE,
        "if v.my_notarize is not None or v.my_nullify is not None or v.round.view <= self._vote_above:",
        "if v.my_notarize is not None or v.my_nullify is not None:",
        (f"{GUARD}::test_a_validator_without_its_journal_votes_only_after_being_in_sync_and_watching",
         f"{GUARD}::test_an_abstaining_engine_signs_nothing_but_follows_certificates"),
    ),
    Mutation(
        "no per-view state before a certificate verifies", ENGINE,
        "v = self._views.get(r.view)\n        seed = None if v is None else v.seed",
        "v = self._state(r.view)\n        seed = None if v is None else v.seed",
        (f"{FLOOD}::test_junk_certificates_for_far_views_create_no_view_state",),
    ),
    Mutation(
        "a bad certificate's sender is muted for retry", ENGINE,
        "if self._now < self._cert_muted.get(sender, -1):\n            return",
        "pass",
        (f"{FLOOD}::test_a_sender_of_a_bad_certificate_is_reported_and_its_certificates_ignored_for_retry",),
    ),
    Mutation(
        "a proven conflict is checked once per (signer, view, kind)", ENGINE,
        "if key in v.conflicted:\n            return",
        "pass",
        (f"{FLOOD}::test_an_equivocator_is_recorded_once_per_view_and_kind_and_its_repeats_cost_no_check",),
    ),
    Mutation(
        "an abstaining leader asks for no block", ENGINE,
        "if v.round.view <= self._vote_above:  # abstaining: a proposal is a notarize it may not sign, so no build\n"
        "            return",
        "pass",
        (f"{GUARD}::test_an_abstaining_leader_asks_for_no_block",),
    ),
    Mutation(
        "the double-sign watch counts short view jumps", JOURNAL_SRC,
        "view > self._last + WATCH_STEP", "view > self._last + 1",
        (f"{GUARD}::test_the_guard_counts_short_jumps_as_watching_and_starts_over_on_a_long_one",),
    ),
    Mutation(
        "an answered sync request is not late while it is verified", SYNC_CLIENT,
        "if not r.answered and now - r.sent_at >= self.limits.timeout_s}",
        "if now - r.sent_at >= self.limits.timeout_s}",
        (f"{SYNC_TESTS}::test_an_answer_being_verified_is_not_late_however_long_its_verification_takes",),
    ),
    Mutation(
        "heights a byte-cut page did not bring are asked for at once", SYNC_CLIENT,
        "_Inflight(sender, len(msg.blocks), r.sent_at, answered=size)",
        "_Inflight(sender, r.count, r.sent_at, answered=size)",
        (f"{SYNC_TESTS}::test_heights_a_page_cut_by_bytes_did_not_bring_are_asked_for_before_it_is_verified",),
    ),
    Mutation(
        "a second answer to one sync request is not opened", SYNC_CLIENT,
        "if r is None or r.peer != sender or r.answered:", "if r is None or r.peer != sender:",
        (f"{SYNC_TESTS}::test_a_second_answer_to_one_request_is_not_opened",),
    ),
    Mutation(
        "sync asks only peers that claim the height", SYNC_CLIENT,
        "if p.claimed >= first and p.distrusted_until <= now", "if p.distrusted_until <= now",
        (f"{SYNC_TESTS}::test_only_able_peers_are_asked_connected_claiming_the_height_and_under_their_request_limit",),
    ),
    Mutation(
        "sync asks only connected peers", SYNC_CLIENT,
        "and i in connected and busy.get(i, 0) < self.limits.per_peer\n",
        "and busy.get(i, 0) < self.limits.per_peer\n",
        (f"{SYNC_TESTS}::test_only_able_peers_are_asked_connected_claiming_the_height_and_under_their_request_limit",),
    ),
    Mutation(
        "sync never asks a distrusted peer", SYNC_CLIENT,
        "p.distrusted_until <= now\n                and", "True\n                and",
        (f"{SYNC_TESTS}::test_a_distrusted_peer_is_not_asked_even_with_a_request_slot_free",),
    ),
    Mutation(
        "a late vote counts as its signer's activity", ENGINE,
        "            self._late_activity(sender, vote)\n", "",
        (f"{LATE}::test_a_signer_whose_votes_all_arrive_after_finalization_keeps_its_leader_timeout",
         f"{WAN}::test_a_validator_whose_votes_arrive_after_finalization_keeps_its_leader_views"),
    ),
    Mutation(
        "a late vote counts only once its signature verifies", ENGINE,
        "        if self.scheme.verify(sender, vote.vote_message(), vote.signature):\n"
        "            self._last_vote_view[sender] = view\n        else:",
        "        self._last_vote_view[sender] = view\n        if False:",
        (f"{LATE}::test_a_forged_late_vote_does_not_count_as_activity",),
    ),
    Mutation(
        "at most one late-vote check per signer per view", ENGINE,
        "        if self._late_checked[sender] >= self.view:\n            return", "",
        (f"{LATE}::test_late_votes_cost_at_most_one_check_per_signer_per_view",),
    ),
    Mutation(
        "a late vote is checked only when it keeps its signer active", ENGINE,
        " or view + k <= self.view", "",
        (f"{LATE}::test_a_late_vote_is_checked_only_when_it_would_matter",),
    ),
    Mutation(
        "a late vote is checked only once its signer's activity is half stale", ENGINE,
        " or self.view - seen < k // 2:", ":",
        (f"{LATE}::test_a_late_vote_is_not_checked_while_its_signers_activity_is_recent",),
    ),
)

IGNORE = shutil.ignore_patterns(".git", ".venv", ".venv-*", "__pycache__", ".pytest_cache", ".mypy_cache",
                                ".ruff_cache", ".hypothesis", "*.egg-info", "devnet-home", "testnet-home", "build",
                                "dist")


class StaleTable(Exception):
    pass


def _apply(text: str, m: Mutation) -> str:
    count = text.count(m.original)
    if count != 1:
        raise StaleTable(f"{m.rule!r}: snippet found {count} times in {m.file} (expected exactly once): "
                         f"{m.original!r}")
    return text.replace(m.original, m.mutated)


def _run(tree: Path, tests: tuple[str, ...], python: str) -> dict[str, str]:
    """Node id → outcome ('passed', 'failed', 'error', 'skipped', 'missing') of ``tests`` run in ``tree``."""
    with tempfile.TemporaryDirectory() as out:
        xml = Path(out) / "junit.xml"
        env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
        probe = subprocess.run([python, "-c", "import cowboy_node; print(cowboy_node.__file__)"], cwd=tree,
                               env=env, capture_output=True, text=True, check=True).stdout.strip()
        if not Path(probe).resolve().is_relative_to(tree.resolve()):
            raise RuntimeError(f"the copy's cowboy_node is not the one imported ({probe})")
        subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
                        "addopts=", f"--junitxml={xml}", *tests], cwd=tree, env=env, capture_output=True,
                       text=True, check=False)
        got: dict[str, str] = {}
        if xml.exists():
            for case in ET.parse(xml).getroot().iter("testcase"):
                path = case.get("classname", "").replace(".", "/") + ".py"
                node = f"{path}::{case.get('name')}"
                kinds = {child.tag for child in case}
                got[node] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                             else "skipped" if "skipped" in kinds else "passed")
        return {t: got.get(t, "missing") for t in tests}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", help="rules to run (substring match); default all")
    ap.add_argument("--list", action="store_true", help="print the table and exit")
    ap.add_argument("--python", default=sys.executable, help="interpreter with the test dependencies")
    args = ap.parse_args(argv)
    table = [m for m in MUTATIONS if not args.only or any(s in m.rule for s in args.only)]
    if args.list:
        print(json.dumps([{"rule": m.rule, "file": m.file, "tests": m.tests} for m in table], indent=2))
        return 0
    try:  # check the whole table against the working tree before copying anything
        for m in table:
            _apply((ROOT / m.file).read_text(), m)
    except StaleTable as e:
        print(json.dumps({"error": str(e)}), file=sys.stderr)
        return 2
    report: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="consensus-mutations-") as tmp:
        tree = Path(tmp) / "repo"
        shutil.copytree(ROOT, tree, ignore=IGNORE)
        every = tuple(dict.fromkeys(t for m in table for t in m.tests))
        baseline = _run(tree, every, args.python)
        broken = {t: o for t, o in baseline.items() if o != "passed"}
        if broken:
            print(json.dumps({"error": "the unmutated baseline does not pass", "tests": broken}, indent=2),
                  file=sys.stderr)
            return 2
        rules: dict[str, object] = {}
        for m in table:
            target = tree / m.file
            original = target.read_text()
            try:
                target.write_text(_apply(original, m))
                outcome = _run(tree, m.tests, args.python)
            finally:
                target.write_text(original)
            failed = [t for t, o in outcome.items() if o in ("failed", "error")]
            rules[m.rule] = {"result": "killed" if failed else "SURVIVED", "failed": failed,
                             "not_failed": [t for t in m.tests if t not in failed]}
        report["rules"] = rules
    survived = [r for r, v in rules.items() if v["result"] == "SURVIVED"]  # type: ignore[index]
    report["summary"] = {"rules": len(rules), "killed": len(rules) - len(survived), "survived": survived}
    print(json.dumps(report, indent=2))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
