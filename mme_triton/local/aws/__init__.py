"""The embedded stack's AWS side: moto's server for S3, SageMaker, IAM, STS and Application Auto Scaling,
with what moto lacks or answers differently from AWS added on top (:mod:`.controlplane`,
:mod:`._moto_patches`, and :mod:`._shapes`, which gives every answer the shape of the API)."""
