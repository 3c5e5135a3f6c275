"""RL: advantage estimators, tree-aware losses and the embedded trainer."""
