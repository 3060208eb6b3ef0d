"""The live loop: incoming events carried through the whole turn to delivered bubbles, and the
replay of recorded chats (``docs/bot.md``)."""
