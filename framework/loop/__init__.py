"""The live loop: incoming events carried through the whole turn to delivered bubbles
(``docs/bot.md``). Replaying recorded chats through it is :mod:`promptweave.replay`."""
