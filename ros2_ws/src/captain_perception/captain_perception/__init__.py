"""CaPtain perception: cameras to detections and metric geometry."""
