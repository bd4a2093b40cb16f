"""The pre-arm checks, one module per family (``runtime/pre_arm_checks.PreArmChecks`` joins them)."""
