"""The session protocol: ids, actions, state, the reducer and intents. Pure: no I/O."""
