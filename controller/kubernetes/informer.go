package kubernetes

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// newInformer returns an informer of unstructured objects of gvr in
// namespace ("" for all), listed and watched through the dynamic client with
// the options tweak narrows. It is what client-go's dynamicinformer builds,
// without that package: dynamicinformer imports k8s.io/client-go/informers,
// which links every typed clientset and API group into the binary (tens of
// MB of it and of its resident memory, in directory mode too).
func newInformer(client dynamic.Interface, gvr schema.GroupVersionResource, namespace string,
	resync time.Duration, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return client.Resource(gvr).Namespace(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return client.Resource(gvr).Namespace(namespace).Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(
		cache.ToListWatcherWithWatchListSemantics(lw, client),
		&unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, ObjectDescription: gvr.String()},
	)
}
