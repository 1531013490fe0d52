// Anchor for the precompiled header target (cmake/pch.cmake); no code.
