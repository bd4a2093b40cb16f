"""typing.Protocol interfaces over contracts. Imports contracts only."""
