"""Quality checks of a run: the bound policy, exact evidence per scope, the verdict, the target plan."""
