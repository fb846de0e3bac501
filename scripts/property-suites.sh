# The property suites (checks/properties/), as one Criterion --filter
# pattern; sourced by scripts/property-seeds.sh and
# scripts/mutation-properties.sh.  One suite per file: test_<suite>.c.
PROPERTY_FILTER='@(permutation|pe_rotation|rope_relative|layernorm_invariance|softmax_temperature|qk_variance|structure)/*'
