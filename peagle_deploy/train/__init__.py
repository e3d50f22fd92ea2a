"""Training a P-EAGLE drafter for a team's own model (`peagle train`, `train_drafter()`).

spec (`TrainingSpec`) -> resolved training job -> checks -> the `CreateTrainingJob`
request (`TrainingPlan`), as the deployment planner does; then the job itself. Nothing
heavy is imported here: `peagle plan --json` imports this package without boto3.
"""
