"""Off-chain jobs on chain (CIP-2 / CIP-11): selection, verification, payment, lifecycle."""
