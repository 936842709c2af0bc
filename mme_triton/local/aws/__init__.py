"""The embedded stack's AWS side: moto's server for S3, SageMaker, IAM, STS, Application Auto Scaling and
CloudWatch, with what moto lacks or answers differently from AWS added on top (:mod:`.controlplane`,
:mod:`._moto_patches`, :mod:`._shapes`, which gives every answer the shape of the API, and the CloudWatch
metric calls in :mod:`.cloudwatch`), and the recorder that publishes the endpoints' metrics to that
CloudWatch (:mod:`.metrics`)."""
