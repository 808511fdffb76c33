"""What tests share: polling (`polling`), a session accepted for a Supervisor and the
Supervisor itself (`supervisor`), plugin uploads (`plugins`). Test modules import from
here, never from one another."""
