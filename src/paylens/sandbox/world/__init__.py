"""The world: the sandbox's state and the semantics of each operation, by resource. `world.World`
composes the per-resource operations (`transactions`, `quotes`, `cards`, `platform`) over
`base.WorldBase`; `render/` turns rows into wire bodies, `wallets/` holds the embedded wallets."""
