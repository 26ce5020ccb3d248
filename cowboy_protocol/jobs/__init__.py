"""Job data both sides check alike: result commitments, error results, host rules and the strict JSON-schema
subset of job results.
"""
