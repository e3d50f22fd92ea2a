"""The model custom resource's Lambda code (the asset infra/provider_bundle.py stages)."""
