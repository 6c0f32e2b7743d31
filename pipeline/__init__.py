"""The TFX pipeline: ExampleGen, Trainer, RankingEvaluator, Pusher."""
