"""The main job: synthesis → teacher and student rollouts → grading → curation → prefix trees →
advantages → one RL update → evaluation → report, on the embedded defaults or a TOML config."""
