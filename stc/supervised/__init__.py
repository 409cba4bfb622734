"""Supervised STC: the max-margin MedSTC and its 1-slack multi-class SVM."""
from stc.supervised.medstc import MedSTC
from stc.supervised.svm import CuttingPlaneSVM, loss_augmented_predict, multiclass_hinge

__all__ = ["CuttingPlaneSVM", "MedSTC", "loss_augmented_predict", "multiclass_hinge"]
