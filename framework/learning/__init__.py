"""The learner stage: learners run in the background, per (bot, group), over what the bot
recorded (``docs/learning.md``)."""
