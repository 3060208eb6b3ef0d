"""Delivering and recording: what the bot delivered enters the group log, the user's session, the
bot-reply context and the routing state; long sessions are compressed in the background
(``docs/store.md``)."""
