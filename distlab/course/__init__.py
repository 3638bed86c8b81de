"""Course tooling: graded questions with checks, and building exercises from solutions."""
